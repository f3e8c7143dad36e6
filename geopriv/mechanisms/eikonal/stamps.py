"""Verification stamps: a mechanism file verified once is not verified again by the same user.

Verifying a saved mechanism means recomputing its kernels and checking the guarantee on every
edge of the raster (about half a minute at 200 x 200), and a mechanism is built to be reused.
So when a full verification passes (:meth:`EikonalMechanism.build` followed by ``save``, or a
load that verified the file), geopriv remembers it with a *stamp*:

    stamp = HMAC-SHA256(user key, SCHEME || content digest)

* The **content digest** is the SHA-256 of everything the file holds that the load uses: the
  metadata (options, the stored verification report, the checksum) and every array, byte for
  byte (:func:`.persistence.digests`).  Any change to the file, one array value or the
  report, gives another digest, and so no stamp.
* The **user key** is 32 random bytes made on first use in the user's data directory
  (:func:`home`: ``$GEOPRIV_HOME``, else ``$XDG_DATA_HOME/geopriv``, else
  ``~/.local/share/geopriv``; on Windows ``%LOCALAPPDATA%\\geopriv``), readable by its owner
  only.  It never leaves that file: it is not held by any object, and never printed, logged or
  saved elsewhere.  A key file that others can read or write, or that another user owns, is
  not used (every load then verifies in full).
* The **stamps** are kept in the same directory (``verified/``, one empty file named by the
  stamp), never in the mechanism file: a published mechanism file holds only what is
  computable from its public parameters, and a read-only or shared folder of mechanisms needs
  no write.  Another user's stamps are made with another key, so they are never found here.

:meth:`EikonalMechanism.load` accepts a file without verifying it again only when this user's
stamp of exactly its content digest exists; every other file (changed, copied from someone
else, of an earlier version, or whose stamp was deleted) is verified in full, and stamped if
it passes.  ``SCHEME`` names what the verification checks: a geopriv whose verification
changes uses another scheme, so stamps of the old one are not accepted.

What a stamp does not protect against: someone who can write to your data directory (and so
read your key) can forge stamps, as they could replace geopriv itself.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import warnings

from ...exceptions import GeoprivWarning
from .report import NORMALISER_RTOL, TOLERANCE

#: what a stamp vouches for; change it when what :func:`.verification.verify` checks changes
SCHEME = f"geopriv.eikonal.verified/1 tolerance={TOLERANCE!r} normaliser_rtol={NORMALISER_RTOL!r}"
#: the key file and the stamps' folder, in :func:`home`
KEY_FILE = "stamp.key"
STAMP_DIR = "verified"
KEY_BYTES = 32


def home() -> str:
    """geopriv's per-user data directory: ``$GEOPRIV_HOME``, else ``$XDG_DATA_HOME/geopriv``,
    else ``~/.local/share/geopriv`` (Windows: ``%LOCALAPPDATA%\\geopriv``).  Not created here."""
    given = os.environ.get("GEOPRIV_HOME")
    if given:
        return os.path.abspath(os.path.expanduser(given))
    if os.name == "nt" and os.environ.get("LOCALAPPDATA"):
        return os.path.join(os.environ["LOCALAPPDATA"], "geopriv")
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(os.path.abspath(base), "geopriv")


def _private_dir(path: str) -> bool:
    """Create ``path`` (owner-only) if needed; True when it is a directory this user owns that others cannot write."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    if os.name == "nt":
        return True
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def _warn(text: str) -> None:
    warnings.warn(
        f"{text} geopriv verifies every mechanism file in full at each load until this is fixed.",
        GeoprivWarning,
        stacklevel=4,
    )


def _key(create: bool):
    """The user's stamp key (bytes), or None when there is none (``create=False``) or it cannot be used.

    Never stored in an object or a module variable: read each time (a few microseconds).
    """
    folder = home()
    path = os.path.join(folder, KEY_FILE)
    if not os.path.lexists(path):
        if not create or not _private_dir(folder):
            return None
        from ...io import write_new_file

        try:  # owner-only temporary file, hard-linked into place: never a partial key, never two keys
            write_new_file(path, lambda fh: fh.write(os.urandom(KEY_BYTES)), prefix=".geopriv-key-")
        except FileExistsError:
            pass  # another process made it first: use that one
        except OSError:
            return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        _warn(f"The stamp key {path} cannot be read (or is a symbolic link).")
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if os.name != "nt" and (not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077):
            _warn(
                f"The stamp key {path} is not a file of yours readable by you only (chmod 600 it, or delete it "
                "to have a new one made)."
            )
            return None
        key = fh.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        _warn(f"The stamp key {path} is not {KEY_BYTES} bytes long (delete it to have a new one made).")
        return None
    return key


def _stamp_path(content_digest: str, key: bytes) -> str:
    mac = hmac.new(key, f"{SCHEME}\n{content_digest}".encode(), hashlib.sha256).hexdigest()
    return os.path.join(home(), STAMP_DIR, mac)


def is_stamped(content_digest: str) -> bool:
    """True when this user stamped exactly this content digest (a full verification passed)."""
    key = _key(create=False)
    if key is None:
        return False
    try:
        return os.path.isfile(_stamp_path(content_digest, key))
    finally:
        del key


def stamp(content_digest: str) -> bool:
    """Remember that the content with this digest passed a full verification (True when stamped).

    Creates the user's key on first use.  Failing to write (a read-only home) only means the next
    load verifies in full again.
    """
    key = _key(create=True)
    if key is None:
        return False
    try:
        path = _stamp_path(content_digest, key)
    finally:
        del key
    if os.path.isfile(path):
        return True
    if not _private_dir(os.path.dirname(path)):
        return False
    from ...io import write_new_file

    try:
        write_new_file(path, lambda fh: None, prefix=".geopriv-stamp-")
    except FileExistsError:
        pass
    except OSError:
        return False
    return True
