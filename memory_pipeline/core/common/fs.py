"""One filesystem layer for the storage of record: a local folder or an ``s3://`` URI.

The Parquet tables (``storage.TableStore``), the published index versions
(``indexes/publish.py``), the forget list and the dossier ``.md`` files are read and written
through these functions, so the same code runs on a laptop's disk and on S3-compatible
object storage. Derived, rebuildable state (the provider cache, the DuckDB warehouse, temp
files, downloaded index versions) stays on local disk.

A *location* is a ``Path`` (or a local path string) or an ``s3://bucket/key`` string. Local
locations behave exactly as before (``os.replace`` for atomic writes). On S3:

- **a write is all-or-nothing**: the bytes are serialized in memory first (a failure while
  encoding never touches the store), then sent as one object. Payloads up to
  ``SINGLE_PUT_MAX`` bytes go in one stream that is only completed on close (nothing is
  visible before); larger ones are uploaded to a hidden temp key and copied server-side
  onto the final key (CopyObject is atomic), so a broken upload never leaves a partial
  object under the real name;
- there is no rename and no directory: "folders" are key prefixes, listing is by prefix.

Credentials and the endpoint are plain values handed to ``configure_s3`` by the shell (the
Dagster ``ObjectStoreResource`` reads them from ``EnvVar``s); with nothing configured,
pyarrow's own AWS chain applies (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

SCHEME = "s3://"
# up to this size one stream carries the object and is completed on close (arrow buffers a
# part below its 10 MiB part size in memory); above, temp key + server-side copy
SINGLE_PUT_MAX = 5 * 1024 * 1024
Location = Path | str
CACHE_ENV = "MEMORY_PIPELINE_CACHE_DIR"  # where local copies of remote state go


@dataclass(frozen=True)
class S3Options:
    """How to reach an S3-compatible store; None fields fall back to pyarrow's AWS chain."""

    endpoint_url: str | None = None  # e.g. http://127.0.0.1:9000 (MinIO, moto); None = AWS
    access_key_id: str | None = None
    secret_access_key: str | None = None
    region: str | None = None


_LOCK = threading.Lock()

# what this process never grants others on the files and folders it creates: the output
# holds every owner's messages, so they are 0600 / 0700 whatever the user's umask
PRIVATE_UMASK = 0o077


def private_umask() -> None:
    """Add :data:`PRIVATE_UMASK` to the process's umask, so every file and folder created
    from now on (Parquet, DuckDB, SQLite, index files, dossiers: whatever library writes
    them) is private to its user. Called where a deployment's config is loaded: every
    command, the Dagster code location and the service pass there before they write."""
    current = os.umask(PRIVATE_UMASK)
    os.umask(current | PRIVATE_UMASK)


def make_private(folder: Location | None) -> None:
    """Close an existing local folder this user owns to others (0700): what an earlier
    version created under a looser umask is no longer reachable through it."""
    if folder is None or is_remote(folder):
        return
    try:
        st = os.stat(folder)
        if st.st_uid == os.geteuid() and st.st_mode & 0o077:
            os.chmod(folder, st.st_mode & 0o700)
    except OSError:
        pass  # absent or not ours: created private later, or not ours to change
_OPTIONS = S3Options()
_S3: pafs.S3FileSystem | None = None


def configure_s3(options: S3Options) -> None:
    """Set the process's S3 endpoint and credentials (the shell calls this once per run)."""
    global _OPTIONS, _S3
    with _LOCK:
        if options != _OPTIONS:
            _OPTIONS, _S3 = options, None


def s3_options() -> S3Options:
    """The options ``configure_s3`` last set: what a worker process is handed so it reaches
    the same store (a spawned worker does not share this process's configuration)."""
    return _OPTIONS


def _s3() -> pafs.S3FileSystem:
    global _S3
    with _LOCK:
        if _S3 is None:
            o = _OPTIONS
            kwargs: dict = {}
            if o.endpoint_url:
                scheme, _, host = o.endpoint_url.partition("://")
                kwargs["endpoint_override"] = host.rstrip("/") if host else scheme
                kwargs["scheme"] = scheme if host else "https"
            if o.access_key_id:
                kwargs["access_key"] = o.access_key_id
                kwargs["secret_key"] = o.secret_access_key or ""
            if o.region:
                kwargs["region"] = o.region
            _S3 = pafs.S3FileSystem(**kwargs)
        return _S3


def is_remote(location: Location) -> bool:
    """Whether ``location`` is on object storage (an ``s3://`` URI)."""
    return isinstance(location, str) and location.startswith(SCHEME)


def check_uri(uri: str) -> str | None:
    """The problem with an ``s3://bucket/prefix`` URI, or None when it is usable."""
    bucket = uri[len(SCHEME) :].split("/", 1)[0]
    if not re.fullmatch(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]", bucket):
        return f"{uri!r} does not name a valid bucket (s3://bucket/prefix)"
    return None


def normalize(location: Location) -> Location:
    """A URI without a trailing slash, or a ``Path``."""
    if is_remote(location):
        return str(location).rstrip("/")
    return Path(location)


def join(location: Location, *parts: str) -> Location:
    """``location / part / ...`` for a Path or a URI."""
    if is_remote(location):
        return "/".join([str(location).rstrip("/"), *(p.strip("/") for p in parts)])
    return Path(location).joinpath(*parts)


def name(location: Location) -> str:
    """The last component (file or folder name)."""
    return (
        str(location).rstrip("/").rsplit("/", 1)[-1] if is_remote(location) else Path(location).name
    )


def resolve(location: Location) -> tuple[pafs.FileSystem, str]:
    """(pyarrow filesystem, path inside it): pass both to ``pq.read_table`` and friends."""
    if is_remote(location):
        return _s3(), str(location)[len(SCHEME) :].rstrip("/")
    return pafs.LocalFileSystem(), str(Path(location))


def is_file(location: Location) -> bool:
    fs, path = resolve(location)
    return fs.get_file_info(path).type == pafs.FileType.File


def exists(location: Location) -> bool:
    """A file, or a folder (on S3: a prefix with at least one object under it)."""
    if not is_remote(location):
        return Path(location).exists()
    return is_file(location) or bool(list_files(location, recursive=True))


def list_files(
    folder: Location, suffix: str = "", *, recursive: bool = False
) -> list[tuple[str, int]]:
    """(path relative to ``folder``, size) of the files in ``folder``, sorted; [] if absent.

    Hidden temp files (a name starting with ".") are left out: they are never data."""
    fs, path = resolve(folder)
    sel = pafs.FileSelector(path, recursive=recursive, allow_not_found=True)
    try:
        infos = fs.get_file_info(sel)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(path) :].lstrip("/")
        if rel and not rel.rsplit("/", 1)[-1].startswith(".") and rel.endswith(suffix):
            out.append((rel, int(info.size or 0)))
    return sorted(out)


def read_bytes(location: Location) -> bytes:
    """The whole file; ``FileNotFoundError`` when absent (on S3 too)."""
    if not is_remote(location):
        return Path(location).read_bytes()
    fs, path = resolve(location)
    if fs.get_file_info(path).type != pafs.FileType.File:
        raise FileNotFoundError(str(location))
    with fs.open_input_stream(path) as f:
        return f.read()


def read_text(location: Location) -> str:
    return read_bytes(location).decode("utf-8")


def write_bytes_atomic(location: Location, data: bytes | pa.Buffer) -> None:
    """Replace ``location`` by ``data``: a reader (or a crash) sees the old file or the new
    one, never half of it. Locally: temp file in the same folder + ``os.replace``; on S3:
    one completed upload (see the module docstring)."""
    if not is_remote(location):
        target = Path(location)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            tmp.write_bytes(memoryview(data))
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return
    fs, path = resolve(location)
    if len(data) <= SINGLE_PUT_MAX:
        _put(fs, path, data)
        return
    head, _, tail = path.rpartition("/")
    tmp = f"{head}/.{tail}.{uuid.uuid4().hex}.tmp"
    try:
        _put(fs, tmp, data)
        fs.copy_file(tmp, path)
    finally:
        _delete_quietly(fs, tmp)


def _put(fs: pafs.FileSystem, path: str, data: bytes | pa.Buffer) -> None:
    """One object from one buffer: the stream is written whole and then closed, so the
    upload is completed only after every byte was accepted (never closed half-written by a
    ``with`` block unwinding an exception)."""
    stream = fs.open_output_stream(path)
    stream.write(data)
    stream.close()


def _delete_quietly(fs: pafs.FileSystem, path: str) -> None:
    try:
        fs.delete_file(path)
    except (FileNotFoundError, OSError):
        pass


def write_text_atomic(location: Location, text: str) -> None:
    write_bytes_atomic(location, text.encode("utf-8"))


def delete_file(location: Location) -> bool:
    """Remove one file; True if it existed."""
    if not is_remote(location):
        p = Path(location)
        existed = p.is_file()
        p.unlink(missing_ok=True)
        return existed
    fs, path = resolve(location)
    if fs.get_file_info(path).type != pafs.FileType.File:
        return False
    fs.delete_file(path)
    return True


def delete_tree(folder: Location) -> None:
    """Remove a folder and everything in it (nothing if absent)."""
    if not is_remote(folder):
        shutil.rmtree(folder, ignore_errors=True)
        return
    fs, path = resolve(folder)
    for rel, _ in list_files(folder, recursive=True) + _hidden(folder):
        _delete_quietly(fs, f"{path}/{rel}")
    try:  # the folder marker pyarrow may have left
        fs.delete_dir(path)
    except (FileNotFoundError, OSError):
        pass


def _hidden(folder: Location) -> list[tuple[str, int]]:
    """The hidden (temp) files ``list_files`` leaves out: deleting a folder removes them too."""
    fs, path = resolve(folder)
    sel = pafs.FileSelector(path, recursive=True, allow_not_found=True)
    return [
        (i.path[len(path) :].lstrip("/"), int(i.size or 0))
        for i in fs.get_file_info(sel)
        if i.type == pafs.FileType.File and i.base_name.startswith(".")
    ]


def list_dirs(folder: Location) -> list[str]:
    """Names of the sub-folders (S3: common prefixes) directly in ``folder``, sorted."""
    fs, path = resolve(folder)
    sel = pafs.FileSelector(path, recursive=False, allow_not_found=True)
    try:
        infos = fs.get_file_info(sel)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)


def upload_tree(local: Path, remote: Location) -> list[tuple[str, int]]:
    """Copy every file under the local folder to ``remote``; (relative path, size) sent.

    Each file is one object; callers make the whole tree visible by writing a pointer last
    (index versions), so a half-finished upload is never read."""
    sent = []
    for p in sorted(Path(local).rglob("*")):
        if p.is_file():
            rel = p.relative_to(local).as_posix()
            data = p.read_bytes()
            fs, path = resolve(join(remote, rel))
            if len(data) <= SINGLE_PUT_MAX:
                _put(fs, path, data)
            else:  # large matrices: a streamed copy, no second in-memory buffer
                with p.open("rb") as src, fs.open_output_stream(path) as dst:
                    shutil.copyfileobj(src, dst, 8 * 1024 * 1024)
            sent.append((rel, len(data)))
    return sent


def download_tree(remote: Location, local: Path) -> list[tuple[str, int]]:
    """Copy every file under ``remote`` into the local folder; (relative path, size)."""
    got = []
    fs, path = resolve(remote)
    for rel, size in list_files(remote, recursive=True):
        target = Path(local) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with fs.open_input_stream(f"{path}/{rel}") as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 8 * 1024 * 1024)
        got.append((rel, size))
    return got


def cache_dir(location: Location) -> Path:
    """A local folder for derived state of a remote location (downloaded index versions,
    and the default working folder): ``<base>/<bucket-prefix>-<hash>`` where the base is
    ``$MEMORY_PIPELINE_CACHE_DIR``, else ``$XDG_CACHE_HOME/memory_pipeline`` (``~/.cache``
    without it); for a local location, the location itself."""
    if not is_remote(location):
        return Path(location)
    uri = str(location).rstrip("/")
    base = os.environ.get(CACHE_ENV) or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "memory_pipeline"
    )
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", uri[len(SCHEME) :]).strip("-")[:60]
    digest = hashlib.blake2b(uri.encode("utf-8"), digest_size=4).hexdigest()
    return Path(base) / f"{slug}-{digest}"
