"""Processing parameters declared from a table: one row a parameter, in the dialog's order.

An algorithm with many parameters written as constructor calls is pages of boilerplate in which
what matters (the order, which are optional or advanced, the defaults, the help) is hard to see
and easy to get wrong in one of them.  A table of frozen rows shows it at a glance, and
:func:`add_parameters` builds every row the same way: the QGIS object, its help text, then the
advanced flag, then ``addParameter``.  Defaults that are the library's are computed where the table
is written (``library_default``): the plugin has none of its own.

Only the kinds of parameter the tables use are here; the rest are still declared by hand.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass

from qgis.core import (
    QgsProcessingParameterBand,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterEnum,
    QgsProcessingParameterExtent,
    QgsProcessingParameterFeatureSource,
    QgsProcessingParameterField,
    QgsProcessingParameterNumber,
    QgsProcessingParameterRasterLayer,
)

__all__ = ["Band", "Choice", "Extent", "Field", "Number", "Raster", "Row", "Source", "add_parameters"]


@dataclass(frozen=True)
class Row:
    """What every row has: the parameter's name and label, then (by keyword) optional, advanced and its help."""

    name: str
    label: str
    _: KW_ONLY
    optional: bool = False
    advanced: bool = False
    help: str | None = None

    def build(self):  # pragma: no cover - abstract
        """The QGIS parameter object, before its help and flags."""
        raise NotImplementedError

    def declare(self, algorithm) -> None:
        """Add the parameter to ``algorithm``, with its help text and, if advanced, the advanced flag."""
        param = self.build()
        if self.help is not None:
            param.setHelp(self.help)
        if self.advanced:
            param.setFlags(param.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
        algorithm.addParameter(param)


@dataclass(frozen=True)
class Number(Row):
    """A number: a double, or an integer with ``integer=True``; ``minimum``/``maximum`` None: unbounded."""

    default: object = None
    minimum: float | None = None
    maximum: float | None = None
    integer: bool = False

    def build(self):
        kind = QgsProcessingParameterNumber.Integer if self.integer else QgsProcessingParameterNumber.Double
        bounds = {}
        if self.minimum is not None:
            bounds["minValue"] = self.minimum
        if self.maximum is not None:
            bounds["maxValue"] = self.maximum
        return QgsProcessingParameterNumber(
            self.name, self.label, kind, defaultValue=self.default, optional=self.optional, **bounds
        )


@dataclass(frozen=True)
class Choice(Row):
    """An enum: ``options`` are the labels shown, ``values`` what each means; ``default`` is one of the values."""

    options: tuple
    values: tuple
    default: object

    def build(self):
        return QgsProcessingParameterEnum(
            self.name,
            self.label,
            list(self.options),
            defaultValue=list(self.values).index(self.default),
            optional=self.optional,
        )


@dataclass(frozen=True)
class Field(Row):
    """A field (or with ``multiple=True``, fields) of the layer parameter ``parent``."""

    parent: str
    multiple: bool = False

    def build(self):
        return QgsProcessingParameterField(
            self.name,
            self.label,
            parentLayerParameterName=self.parent,
            allowMultiple=self.multiple,
            optional=self.optional,
        )


@dataclass(frozen=True)
class Source(Row):
    """A vector layer (feature source) of the geometry ``types`` (QgsProcessing.TypeVector...)."""

    types: tuple

    def build(self):
        return QgsProcessingParameterFeatureSource(self.name, self.label, list(self.types), optional=self.optional)


@dataclass(frozen=True)
class Extent(Row):
    """An extent, in any CRS (no default)."""

    def build(self):
        return QgsProcessingParameterExtent(self.name, self.label, defaultValue=None, optional=self.optional)


@dataclass(frozen=True)
class Raster(Row):
    """A raster layer."""

    def build(self):
        return QgsProcessingParameterRasterLayer(self.name, self.label, optional=self.optional)


@dataclass(frozen=True)
class Band(Row):
    """A band of the raster parameter ``parent``."""

    parent: str
    default: object = None

    def build(self):
        return QgsProcessingParameterBand(
            self.name,
            self.label,
            defaultValue=self.default,
            parentLayerParameterName=self.parent,
            optional=self.optional,
        )


def add_parameters(algorithm, table) -> None:
    """Declare the parameters of ``table`` (:class:`Row` objects) on ``algorithm``, in the table's order."""
    for row in table:
        row.declare(algorithm)
