"""The package's own PEP 517 build backend (pyproject.toml: build-backend, backend-path).

setuptools builds in the folder it is given: `pip install <checkout>/python` left build/ and
fp8a_capture.egg-info/ inside the checkout, and needed setuptools and wheel fetched or installed
first. The package is three single-file modules, so a wheel is a zip of them and four metadata
files: this writes it straight into pip's wheel directory, reads nothing but the sources and
pyproject.toml, writes nothing beside them, and needs nothing beyond the standard library
(so `pip install` works offline and with build isolation)."""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/


def _project():
    """name, version, description, requires-python and py-modules from pyproject.toml."""
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()

    def value(key):
        m = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(key), text, re.M)
        if m is None:
            raise RuntimeError("pyproject.toml has no %s" % key)
        return m.group(1)

    modules = re.search(r"^py-modules\s*=\s*\[([^\]]*)\]", text, re.M)
    if modules is None:
        raise RuntimeError("pyproject.toml has no py-modules")
    return {"name": value("name"), "version": value("version"), "summary": value("description"),
            "requires_python": value("requires-python"),
            "modules": re.findall(r'"([^"]+)"', modules.group(1))}


def _dist(p):
    return re.sub(r"[-_.]+", "_", p["name"]).lower() + "-" + p["version"]


def _metadata(p):
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n"
            "Description-Content-Type: text/markdown\n\n%s" %
            (p["name"], p["version"], p["summary"], p["requires_python"], readme))


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d\n" % (path, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    dist_info = _dist(p) + ".dist-info"
    files = []
    for m in p["modules"]:
        with open(os.path.join(HERE, m + ".py"), "rb") as f:
            files.append((m + ".py", f.read()))
    files.append((dist_info + "/METADATA", _metadata(p).encode("utf-8")))
    files.append((dist_info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: fp8a_build\n"
                                        b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    record = "".join(_record_line(path, data) for path, data in files) + dist_info + "/RECORD,,\n"
    files.append((dist_info + "/RECORD", record.encode("utf-8")))
    name = _dist(p) + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, data, zipfile.ZIP_DEFLATED)
    return name


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = _dist(p)
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in ["pyproject.toml", "README.md", "_build/fp8a_build.py"] + [m + ".py" for m in p["modules"]]:
            t.add(os.path.join(HERE, rel), arcname=base + "/" + rel)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = _metadata(p).encode("utf-8")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
