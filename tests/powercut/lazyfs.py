"""A filesystem in user space that loses what was not made durable, as a power cut would
(the idea of Jepsen's LazyFS, in Python over ``fusepy``).

Run as ``python -m tests.powercut.lazyfs BACKING MOUNTPOINT``: the mount shows the files
of the directory BACKING. Every ``write`` and ``truncate`` goes to a copy of the file held
in this process's memory; only ``fsync``/``fdatasync`` writes the dirty part to BACKING. A
*power cut* is SIGKILL of this process (after SIGKILL of every process using the mount):
what was written but not synced is gone, and remounting BACKING shows exactly the durable
state. Metadata (create, unlink, rename, mkdir) is applied to BACKING at once; only data
is lazy (LazyFS's default model too: it loses un-fsynced data, not directory entries).

SQLite's WAL index (``-shm``) is a shared ``mmap`` of a file on the mount, coherent
between processes through the kernel's page cache of the FUSE inode (no ``direct_io``);
SQLite never syncs it and rebuilds it from the WAL after a crash, so losing it in a cut is
what a real power cut does. The mount is ``kernel_cache``-free: reads after a remount
come from this process, never from stale kernel pages.

The process prints ``mounted`` on stdout once the mount answers.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
from typing import Any

from fuse import FUSE, FuseOSError, Operations  # fusepy


class _Cached:
    """A file's visible content while some of it is not durable: the whole file in memory,
    with the range [lo, hi) that differs from BACKING, and whether its size changed."""

    def __init__(self, data: bytes) -> None:
        self.data = bytearray(data)
        self.lo = len(data)
        self.hi = 0
        self.resized = False

    def touch(self, lo: int, hi: int) -> None:
        self.lo = min(self.lo, lo)
        self.hi = max(self.hi, hi)


class LazyFS(Operations):  # type: ignore[misc]
    """Pass-through to ``root`` with writes held in memory until ``fsync``."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self.mutex = threading.RLock()
        self.cache: dict[str, _Cached] = {}
        self.syncs = 0

    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _cached(self, path: str) -> _Cached:
        c = self.cache.get(path)
        if c is None:
            with open(self._full(path), "rb") as f:
                c = self.cache[path] = _Cached(f.read())
        return c

    # -- metadata: applied to BACKING at once --

    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        with self.mutex:
            try:
                st = os.lstat(self._full(path))
            except OSError as exc:
                raise FuseOSError(exc.errno) from None
            out = {k: getattr(st, k) for k in (
                "st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink",
                "st_size", "st_uid")}  # fmt: skip
            c = self.cache.get(path)
            if c is not None:
                out["st_size"] = len(c.data)
            return out

    def readdir(self, path: str, fh: Any) -> list[str]:
        return [".", "..", *os.listdir(self._full(path))]

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._full(path), amode):
            raise FuseOSError(errno.EACCES)
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._full(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._full(path), uid, gid)
        return 0

    def utimens(self, path: str, times: Any = None) -> int:
        os.utime(self._full(path), times)
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._full(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._full(path))
        return 0

    def statfs(self, path: str) -> dict[str, Any]:
        st = os.statvfs(self._full(path))
        return {k: getattr(st, k) for k in (
            "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
            "f_flag", "f_frsize", "f_namemax")}  # fmt: skip

    def unlink(self, path: str) -> int:
        with self.mutex:
            os.unlink(self._full(path))
            self.cache.pop(path, None)
        return 0

    def rename(self, old: str, new: str) -> int:
        with self.mutex:
            os.rename(self._full(old), self._full(new))
            c = self.cache.pop(old, None)
            self.cache.pop(new, None)
            if c is not None:
                self.cache[new] = c
        return 0

    # -- data: held in memory until fsync --

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        with self.mutex:
            fd = os.open(self._full(path), os.O_WRONLY | os.O_CREAT, mode)
            os.close(fd)
        return 0

    def open(self, path: str, flags: int) -> int:
        with self.mutex:
            if not os.path.exists(self._full(path)):
                raise FuseOSError(errno.ENOENT)
            if flags & os.O_TRUNC:
                self.truncate(path, 0)
        return 0

    def read(self, path: str, size: int, offset: int, fh: Any) -> bytes:
        with self.mutex:
            c = self.cache.get(path)
            if c is not None:
                return bytes(c.data[offset : offset + size])
            with open(self._full(path), "rb") as f:
                f.seek(offset)
                return f.read(size)

    def write(self, path: str, data: bytes, offset: int, fh: Any) -> int:
        with self.mutex:
            c = self._cached(path)
            end = offset + len(data)
            if end > len(c.data):
                c.data.extend(b"\0" * (end - len(c.data)))
                c.resized = True
            c.data[offset:end] = data
            c.touch(offset, end)
            return len(data)

    def truncate(self, path: str, length: int, fh: Any = None) -> int:
        with self.mutex:
            c = self._cached(path)
            if length < len(c.data):
                del c.data[length:]
            else:
                c.data.extend(b"\0" * (length - len(c.data)))
                c.touch(len(c.data), length)
            c.resized = True
            return 0

    def fsync(self, path: str, datasync: int, fh: Any) -> int:
        with self.mutex:
            c = self.cache.get(path)
            if c is None:
                return 0
            with open(self._full(path), "r+b") as f:
                if c.hi > c.lo:
                    f.seek(c.lo)
                    f.write(c.data[c.lo : min(c.hi, len(c.data))])
                if c.resized:
                    f.truncate(len(c.data))
            self.syncs += 1
            del self.cache[path]  # BACKING holds it all now
            return 0

    def flush(self, path: str, fh: Any) -> int:
        return 0  # close() makes nothing durable

    def release(self, path: str, fh: Any) -> int:
        return 0


def main(argv: list[str]) -> int:
    backing, mountpoint = argv[1], argv[2]
    fs = LazyFS(backing)

    def announce() -> None:  # once the mount answers
        import time

        for _ in range(200):
            if os.path.ismount(mountpoint):
                print("mounted", flush=True)
                return
            time.sleep(0.02)

    threading.Thread(target=announce, daemon=True).start()
    # no_remote_lock: the kernel keeps POSIX locks itself (SQLite locks with fcntl across
    # processes); libfuse would otherwise forward them here and answer EINVAL
    FUSE(fs, mountpoint, foreground=True, nothreads=False, no_remote_lock=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
