"""The Sedna stand-ins used the way upstream Ianvs plugin files use them.

Covers ``sedna.common.file_ops``, ``sedna.common.log``, ``sedna.common.utils`` and
``sedna.datasources`` (plugin files, parsers on real files, local-only ``FileOps``),
the top-level ``sedna`` stand-in package (plain ``import sedna...`` in a fresh
interpreter, yielding to a real KubeEdge Sedna) and the runtime shim's module objects.
"""
from __future__ import annotations

import importlib
import ipaddress
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from core.common.class_factory import ClassFactory, ClassType
from core.compat.plugin_loader import load_plugin
from core.compat import sedna_shim
from core.compat.sedna_datasources import (BaseDataSource, CSVDataParse, IndexDataParse,
                                           JSONDataParse, TxtDataParse)
from core.compat.sedna_file_ops import FileOps, RemoteStorageError
from core.compat.sedna_utils import _default_route_interfaces, get_host_ip

REPO = Path(__file__).resolve().parents[2]


def run_py(code: str, *, cwd: Path, path: list[Path] | None = None,
           extra_env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess:
    """``python -c code`` in ``cwd``; PYTHONPATH is exactly ``path`` (unset when None)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in path)
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def fake_kubeedge_sedna(site: Path, init: str = "") -> Path:
    """A minimal package with KubeEdge Sedna's layout (real Sedna is not installable here)."""
    pkg = site / "sedna"
    (pkg / "common").mkdir(parents=True)
    (pkg / "__init__.py").write_text(init)
    (pkg / "common" / "__init__.py").write_text("")
    (pkg / "common" / "class_factory.py").write_text(
        "class ClassType:\n    GENERAL = 'general'\n"
        "class ClassFactory:\n    __registry__ = {}\n")
    return pkg


def fake_pypi_sedna(site: Path) -> Path:
    """PyPI's unrelated ``sedna``: a package without ``sedna.common``."""
    pkg = site / "sedna"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("MATHS = True\n")
    return pkg


# --- a plugin file written the way upstream writes them ------------------------------------

PLUGIN = '''
import os

from sedna.common.class_factory import ClassFactory, ClassType
from sedna.common.config import Context
from sedna.common.file_ops import FileOps
from sedna.common.log import LOGGER
from sedna.common.utils import get_host_ip
from sedna.datasources import BaseDataSource, IndexDataParse, TxtDataParse


@ClassFactory.register(ClassType.GENERAL, alias="sedna_surface_probe")
class BaseModel:
    def __init__(self, **kwargs):
        self.host = get_host_ip()

    def train(self, train_index, **kwargs):
        data = IndexDataParse(data_type="train", func=None)
        data.parse(train_index, use_raw=False)
        LOGGER.info("probe parsed %d samples", len(data))
        return data

    def evaluate(self, test_index):
        data = TxtDataParse(data_type="test")
        data.parse(test_index, os.path.join(os.path.dirname(test_index), "missing.txt"))
        return data

    def save(self, model_path):
        weights = os.path.join(os.path.dirname(__file__), "weights.bin")
        with open(weights, "w") as handle:
            handle.write("w")
        FileOps.upload(weights, model_path)
        return FileOps.exists(model_path), FileOps.exists(weights)

    def predict(self, data, **kwargs):
        result = BaseDataSource(data_type="test")
        result.x = list(data)
        return result
'''


def test_upstream_style_plugin_file_uses_the_surface(tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    (data / "images").mkdir(parents=True)
    for name in ("a.png", "b.png"):
        (data / "images" / name).write_text("img")
    (data / "index.txt").write_text("images/a.png 1\n\nimages/b.png 0\n")
    plugin = tmp_path / "basemodel.py"
    plugin.write_text(PLUGIN)

    cls = load_plugin(plugin).lookup(ClassType.GENERAL, "sedna_surface_probe")
    model = cls()
    assert ipaddress.IPv4Address(model.host)
    with caplog.at_level(logging.INFO):
        train = model.train(str(data / "index.txt"))
    assert list(train.x) == [str(data / "images" / "a.png"), str(data / "images" / "b.png")]
    assert list(train.y) == ["1", "0"]
    assert [(r.name, r.getMessage()) for r in caplog.records
            if "probe parsed" in r.getMessage()] == [("sedna", "probe parsed 2 samples")]
    test = model.evaluate(str(data / "index.txt"))
    assert list(test.x) == ["images/a.png", "images/b.png"] and test.y.size == 0
    assert test.is_test_data
    model_path = tmp_path / "out" / "model.bin"
    assert model.save(str(model_path)) == (True, False)  # upload moves by default (Sedna)
    assert model_path.read_text() == "w"
    result = model.predict(np.array(["p", "q", "r"]))
    assert len(result) == result.num_examples() == 3 and result.is_test_data


# --- parsers ------------------------------------------------------------------------------

def test_txt_parse_tokens_labels_missing_files_and_test_data(tmp_path: Path) -> None:
    first, second = tmp_path / "one.txt", tmp_path / "two.txt"
    first.write_text("img/1.png 3\n   \nimg/2.png\n")
    second.write_text("img/3.png 5 extra\n")
    train = TxtDataParse(data_type="train")
    train.parse(str(first), str(tmp_path / "missing.txt"), "", second)
    assert train.x.tolist() == ["img/1.png", "img/2.png", "img/3.png"]
    assert train.y.tolist() == ["3", "0", "5"]  # numpy makes the int 0 a string, as upstream
    assert len(train) == train.num_examples() == 3 and not train.is_test_data

    test = TxtDataParse(data_type="test")
    test.parse(first)
    assert test.x.tolist() == ["img/1.png", "img/2.png"] and test.y.tolist() == []

    nothing = TxtDataParse(data_type="train")
    nothing.parse(str(tmp_path / "missing.txt"))
    assert len(nothing) == 0 and nothing.y.size == 0


def test_txt_parse_use_raw_and_per_line_func(tmp_path: Path) -> None:
    index = tmp_path / "index.txt"
    index.write_text("a b c\nd e f\n")
    raw = TxtDataParse(data_type="eval")
    raw.parse(str(index), use_raw=True)
    assert raw.x.tolist() == [["a", "b", "c"], ["d", "e", "f"]] and raw.y.size == 0

    seen: list[str] = []

    def all_but_last(line: str) -> tuple[list[str], str]:  # the lifelong paradigm's shape
        seen.append(line)
        tokens = line.split()
        return tokens[:-1], tokens[-1]

    parsed = TxtDataParse(data_type="train", func=all_but_last)
    parsed.parse(str(index))
    assert seen == ["a b c", "d e f"]
    assert parsed.x.tolist() == [["a", "b"], ["d", "e"]] and parsed.y.tolist() == ["c", "f"]

    rewritten = TxtDataParse(data_type="train", func=lambda line: line.upper())
    rewritten.parse(str(index))
    assert rewritten.x.tolist() == ["A", "D"] and rewritten.y.tolist() == ["B", "E"]

    ragged = tmp_path / "ragged.txt"
    ragged.write_text("a b\nc\n")
    uneven = TxtDataParse(data_type="train")
    uneven.parse(str(ragged), use_raw=True)
    assert uneven.x.dtype == object and uneven.x.tolist() == [["a", "b"], ["c"]]


def test_func_alias_is_looked_up_in_the_callback_group(tmp_path: Path) -> None:
    class Swap:
        def __call__(self, line: str) -> list[str]:
            return list(reversed(line.split()))

    ClassFactory.register_cls(Swap, ClassType.CALLBACK, alias="swap_tokens_for_test")
    try:
        index = tmp_path / "i.txt"
        index.write_text("x1 y1\n")
        parsed = TxtDataParse(data_type="train", func="swap_tokens_for_test")
        parsed.parse(str(index))
        assert isinstance(parsed.process_func, Swap)
        assert parsed.x.tolist() == ["y1"] and parsed.y.tolist() == ["x1"]
    finally:
        ClassFactory.unregister(ClassType.CALLBACK, "swap_tokens_for_test")
    with pytest.raises(ValueError, match="swap_tokens_for_test"):
        TxtDataParse(data_type="train", func="swap_tokens_for_test")


def test_index_parse_resolves_paths_against_the_index_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "dataset"
    (folder / "img").mkdir(parents=True)
    (folder / "img" / "1.png").write_text("")
    (folder / "labels").mkdir()
    (folder / "labels" / "1.txt").write_text("")
    index = folder / "index.txt"
    index.write_text(f"img/1.png labels/1.txt\nimg/1.png 3\n{tmp_path}/abs.png 4\n"
                     "img/missing.png 5\n")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # resolution must not depend on the current directory

    parsed = IndexDataParse(data_type="train")
    parsed.parse(os.path.relpath(index, elsewhere), use_raw=False)
    img, label = str(folder / "img" / "1.png"), str(folder / "labels" / "1.txt")
    assert parsed.x.tolist() == [img, img, f"{tmp_path}/abs.png", "img/missing.png"]
    assert parsed.y.tolist() == [label, "3", "4", "5"]  # plain labels stay labels

    seen: list[str] = []

    def upstream_style(line: str) -> str:  # joins the index folder itself, like the example
        seen.append(line)
        return os.path.join(str(folder), line)

    joined = IndexDataParse(data_type="eval", func=upstream_style)
    joined.parse(str(index), use_raw=False)
    assert seen[0] == f"{img} {label}"
    assert joined.x.tolist()[:2] == [img, img] and joined.y.tolist()[:2] == [label, "3"]

    test = IndexDataParse(data_type="test")
    test.parse(str(index), str(folder / "nope.txt"))
    assert len(test) == 4 and test.y.size == 0


def test_base_data_source_by_hand_and_save(tmp_path: Path) -> None:
    data = BaseDataSource(data_type="eval")
    with pytest.raises(TypeError, match="x is None"):
        len(data)
    with pytest.raises(NotImplementedError):
        data.parse("anything")
    data.x, data.y = np.array(["q1", "q2"]), np.array(["a1", "a2"])
    assert len(data) == data.num_examples() == 2 and not data.is_test_data
    assert data.meta_attr is None and data.process_func is None
    assert BaseDataSource().data_type == "train" and BaseDataSource("test").is_test_data

    saved = data.save(str(tmp_path / "ds.pkl"))
    assert saved == str(tmp_path / "ds.pkl")
    loaded = FileOps.load(saved)
    assert loaded.y.tolist() == ["a1", "a2"] and loaded.data_type == "eval"
    temp = data.save()
    try:
        assert FileOps.load(temp).x.tolist() == ["q1", "q2"]
    finally:
        os.remove(temp)


def test_csv_parse_with_pandas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pd = pytest.importorskip("pandas", reason="pandas is not installed; CSVDataParse needs "
                                               "it (pip install pandas)")
    monkeypatch.setitem(sys.modules, "pycocotools", None)  # CSV must not need pycocotools
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text("f1,f2,extra,y\n1,2,x,0\n3,4,x,1\n")
    second.write_text("f1,f2\n9,9\n")  # no label column: skipped
    parsed = CSVDataParse(data_type="train")
    parsed.parse(str(first), str(second), str(tmp_path / "missing.csv"),
                 {"f1": 5, "f2": 6, "y": 1}, label="y", usecols="f1,f2")
    assert list(parsed.x.columns) == ["f1", "f2"]
    assert parsed.x["f1"].tolist() == [1, 3, 5] and parsed.y.tolist() == [0, 1, 1]
    assert len(parsed) == 3

    doubled = CSVDataParse(data_type="train", func=lambda frame: frame * 2)
    doubled.parse(str(first), usecols=["f1"])
    assert list(doubled.x.columns) == ["f1"] and doubled.x["f1"].tolist() == [2, 6]
    assert doubled.y is None

    with pytest.raises(ValueError, match="usecols not found"):
        CSVDataParse(data_type="train").parse(str(first), label="y", usecols="f1,nope")

    skipped = CSVDataParse(data_type="train")
    skipped.parse(str(second), label="y")
    assert skipped.x is None and skipped.y is None
    assert isinstance(CSVDataParse.parse_json({"a": 1}), pd.DataFrame)


def test_pandas_is_lazy_and_its_absence_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("x,y\n1,2\n")
    res = run_py("""
        import sys
        sys.modules["pandas"] = None  # block the import, as if pandas were not installed
        import sedna.datasources
        from sedna.datasources import CSVDataParse
        try:
            CSVDataParse(data_type="train").parse("a.csv", label="y")
        except ModuleNotFoundError as exc:
            print("ERROR", exc)
    """, cwd=tmp_path, path=[REPO])
    assert res.returncode == 0, res.stderr
    assert "ERROR CSVDataParse needs pandas" in res.stdout
    assert "pip install pandas" in res.stdout

    res = run_py("""
        import sys
        import sedna.datasources, sedna.common.file_ops, sedna.common.class_factory
        print(sorted(m for m in ("pandas", "pycocotools") if m in sys.modules))
    """, cwd=tmp_path, path=[REPO])
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_json_parse_needs_pycocotools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pycocotools", None)
    monkeypatch.setitem(sys.modules, "pycocotools.coco", None)
    with pytest.raises(ModuleNotFoundError, match="pip install pycocotools"):
        JSONDataParse(data_type="test").parse(str(tmp_path / "ann.json"))
    with pytest.raises(ValueError, match="annotation file"):
        JSONDataParse(data_type="test").parse()


def test_json_parse_mot17_layout(tmp_path: Path) -> None:
    pytest.importorskip("pycocotools.coco", reason="pycocotools is not installed; "
                                                   "JSONDataParse needs it")
    root = tmp_path / "mot"
    (root / "annotations").mkdir(parents=True)
    gt = root / "train" / "MOT17-02" / "gt" / "gt_val_half.txt"
    gt.parent.mkdir(parents=True)
    gt.write_text("")
    ann = {
        "images": [{"id": 1, "width": 640, "height": 480, "frame_id": 1, "video_id": 2,
                    "file_name": "MOT17-02/img1/000001.jpg"}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 7, "bbox": [10, 20, 30, 40], "area": 1200,
             "iscrowd": 0, "track_id": 5},
            {"id": 2, "image_id": 1, "category_id": 7, "bbox": [0, 0, 0, 0], "area": 0,
             "iscrowd": 0, "track_id": 6}],
        "categories": [{"id": 7, "name": "pedestrian"}],
    }
    path = root / "annotations" / "val_half.json"
    path.write_text(json.dumps(ann))
    parsed = JSONDataParse(data_type="test")
    parsed.parse(str(path))
    assert parsed.x["data_dir"] == root / "train" and parsed.x["ids"] == [1]
    boxes, info, name = parsed.x["annotations"][0]
    assert boxes.tolist() == [[10, 20, 40, 60, 0, 5]]  # the zero-area box is dropped
    assert info == (480, 640, 1, 2, "MOT17-02/img1/000001.jpg") and name == info[4]
    assert parsed.y == [gt]


# --- FileOps -------------------------------------------------------------------------------

def test_upload_a_file_moves_it_by_default(tmp_path: Path) -> None:
    src = tmp_path / "model.bin"
    src.write_bytes(b"weights")
    dst = tmp_path / "deep" / "er" / "model.bin"
    assert FileOps.upload(str(src), str(dst)) == str(dst)
    assert dst.read_bytes() == b"weights" and not src.exists()

    src.write_bytes(b"again")
    target_dir = tmp_path / "existing"
    target_dir.mkdir()
    FileOps.upload(src, target_dir, clean=False)  # onto a folder: lands inside, kept
    assert (target_dir / "model.bin").read_bytes() == b"again" and src.exists()

    FileOps.upload(str(src), str(src))  # same file: nothing copied, nothing deleted
    assert src.read_bytes() == b"again"
    with pytest.raises(FileNotFoundError):
        FileOps.upload(str(tmp_path / "missing.bin"), str(dst))
    with pytest.raises(ValueError, match="destination"):
        FileOps.upload(str(src), "")
    assert src.exists()


def test_upload_a_directory_merges_and_tar_keeps_the_source(tmp_path: Path) -> None:
    src = tmp_path / "ckpt"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("new")
    (src / "sub" / "b.txt").write_text("b")
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "a.txt").write_text("old")
    (dst / "keep.txt").write_text("k")
    FileOps.upload(str(src), str(dst), clean=False)
    assert (dst / "a.txt").read_text() == "new" and (dst / "sub" / "b.txt").read_text() == "b"
    assert (dst / "keep.txt").exists() and src.exists()

    FileOps.upload(str(src), str(tmp_path / "moved"))
    assert (tmp_path / "moved" / "sub" / "b.txt").exists() and not src.exists()

    temp = FileOps.download(str(tmp_path / "moved"))  # no dst: a new temporary folder
    try:
        assert (Path(temp) / "sub" / "b.txt").read_text() == "b"
    finally:
        shutil.rmtree(temp)

    shutil.copytree(tmp_path / "moved", src)
    archive = tmp_path / "ckpt_copy.tar.gz"
    FileOps.upload(str(src), str(archive), tar=True)
    assert src.is_dir() and not (tmp_path / "ckpt.tar.gz").exists()  # archive cleaned
    with tarfile.open(archive) as tar:
        assert "ckpt/sub/b.txt" in tar.getnames()

    unpack = tmp_path / "unpack" / "copy.tar.gz"
    assert FileOps.download(str(archive), str(unpack), unzip=True) == str(unpack)
    assert (unpack.parent / "ckpt" / "sub" / "b.txt").read_text() == "b"
    assert archive.exists()  # download copies


def test_fileops_local_helpers(tmp_path: Path) -> None:
    assert FileOps.join_path("/a", "/b", "c") == "/a/b/c"
    assert FileOps.join_path("s3://bucket", "/key") == "s3://bucket/key"
    assert FileOps.join_path("only") == "only"
    folder = tmp_path / "f"
    (folder / "x").mkdir(parents=True)
    (folder / "x" / "y.txt").write_text("y")
    assert FileOps.exists(str(folder)) and FileOps.exists(folder / "x" / "y.txt")
    assert not FileOps.exists(str(tmp_path / "nope"))
    FileOps.clean_folder([str(folder)])
    assert folder.is_dir() and not any(folder.iterdir())
    FileOps.clean_folder(str(tmp_path / "new" / "dir"), clean=False)
    assert (tmp_path / "new" / "dir").is_dir()
    FileOps.make_base_dir(str(tmp_path / "base" / "file.txt"))
    assert (tmp_path / "base").is_dir() and not (tmp_path / "base" / "file.txt").exists()
    FileOps.make_dir(str(tmp_path), "made")
    assert (tmp_path / "made").is_dir()
    FileOps.delete(str(tmp_path / "made"))
    FileOps.delete(str(tmp_path / "made"))  # missing: ignored
    assert not (tmp_path / "made").exists()
    path = FileOps.dump({"k": [1, 2]}, str(tmp_path / "obj.pkl"))
    assert FileOps.load(path) == {"k": [1, 2]} and FileOps.load(f"file://{path}") == {
        "k": [1, 2]}
    with pytest.raises(FileNotFoundError):
        FileOps.load(str(tmp_path / "none.pkl"))
    assert FileOps.is_local(path) and FileOps.is_local("file:///x")
    assert not FileOps.is_local(str(tmp_path / "none")) and not FileOps.is_remote(path)
    assert FileOps.get_file_hash(path) and FileOps.get_file_hash(str(tmp_path / "none")) == ""
    assert FileOps.pickle_string_to_obj(FileOps.obj_to_pickle_string((1, "a"))) == (1, "a")


@pytest.mark.parametrize("url", ["s3://bucket/model.bin", "obs://bucket/x",
                                 "https://example.com/a/b.bin", "http://host/x/y"])
def test_remote_urls_raise_without_touching_the_network(url: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("network used")

    for name in ("connect", "connect_ex", "sendto"):
        monkeypatch.setattr(socket.socket, name, no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    local = tmp_path / "f.bin"
    local.write_text("x")
    assert FileOps.is_remote(url) and not FileOps.is_local(url)
    calls = [lambda: FileOps.upload(str(local), url), lambda: FileOps.download(url),
             lambda: FileOps.exists(url), lambda: FileOps.load(url),
             lambda: FileOps.dump({"a": 1}, url), lambda: FileOps.upload(url, str(local))]
    for call in calls:
        with pytest.raises(RemoteStorageError, match="needs the real KubeEdge Sedna"):
            call()
    assert local.exists()  # nothing was moved away


# --- LOGGER and get_host_ip ----------------------------------------------------------------

def test_logger_propagates_to_the_ianvs_handler_once(tmp_path: Path) -> None:
    res = run_py("""
        from core.common.log import setup_logging
        setup_logging("INFO")
        from sedna.common.log import LOGGER
        print(LOGGER.name, LOGGER.handlers, LOGGER.propagate)
        LOGGER.info("hello from a sedna plugin")
        LOGGER.warning("careful")
    """, cwd=tmp_path, path=[REPO])
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "sedna [] True"
    assert res.stderr.count("hello from a sedna plugin") == 1
    assert "[INFO] - hello from a sedna plugin" in res.stderr  # the ianvs format


def test_get_host_ip_is_an_ipv4_address_found_without_connecting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    expected = get_host_ip()

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("network used")

    for name in ("connect", "connect_ex", "send", "sendto"):
        monkeypatch.setattr(socket.socket, name, no_network)
    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "create_connection"):
        monkeypatch.setattr(socket, name, no_network)
    address = ipaddress.IPv4Address(get_host_ip())
    assert str(address) == expected
    if sys.platform.startswith("linux") and _default_route_interfaces():
        assert not address.is_loopback  # a host with a default route has a real address


NETNS_PROBE = """
import json, socket
def refuse(*a, **k):
    raise AssertionError("network used")
for name in ("connect", "connect_ex", "send", "sendto"):
    setattr(socket.socket, name, refuse)
socket.getaddrinfo = socket.gethostbyname = refuse
from core.compat.sedna_utils import _default_route_interfaces, get_host_ip
print(json.dumps({"names": [n for _, n in socket.if_nameindex()], "ip": get_host_ip()}))
"""


def test_get_host_ip_in_a_fresh_network_namespace(tmp_path: Path) -> None:
    """Only loopback -> 127.0.0.1; veth addresses are found with no route to anywhere
    (Sedna's connect-to-8.8.8.8 answers 127.0.0.1 there); the default route decides."""
    unshare = shutil.which("unshare")
    if not sys.platform.startswith("linux") or unshare is None:
        pytest.skip("needs Linux and unshare(1) to make a network namespace")
    probe = tmp_path / "probe.py"
    probe.write_text(NETNS_PROBE)
    script = f"""
set -e
py() {{ PYTHONPATH={REPO} {sys.executable} {probe}; }}
py
ip link add v0 type veth peer name v1
ip addr add 10.11.12.13/24 dev v0
ip addr add 10.99.0.7/24 dev v1
ip link set lo up; ip link set v0 up; ip link set v1 up
py
ip route add default dev v0
py
ip route del default dev v0
ip route add default dev v1
py
"""
    res = None
    for flags in ("-n", "-rn"):
        res = subprocess.run([unshare, flags, "sh", "-c", script], capture_output=True,
                             text=True, timeout=120)
        if res.returncode == 0:
            break
    assert res is not None
    if res.returncode != 0:
        pytest.skip(f"cannot build a network namespace with veth here: {res.stderr[-300:]}")
    runs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["ip"] for r in runs[:1]] == ["127.0.0.1"] and runs[0]["names"] == ["lo"]
    first = next(n for n in runs[1]["names"] if n in ("v0", "v1"))
    assert runs[1]["ip"] == {"v0": "10.11.12.13", "v1": "10.99.0.7"}[first]
    assert runs[2]["ip"] == "10.11.12.13"
    assert runs[3]["ip"] == "10.99.0.7"


# --- the top-level stand-in package and the runtime shim ------------------------------------

def test_surface_table_matches_the_stand_in_package() -> None:
    built = sedna_shim._build_modules()
    for name, (source, exports) in sedna_shim.SURFACE.items():
        on_disk = importlib.import_module(name)
        implementation = importlib.import_module(source)
        assert sedna_shim.is_shim(on_disk) and sedna_shim.is_shim(built[name]), name
        assert sorted(on_disk.__all__) == sorted(exports), name
        for attr in exports:
            assert getattr(on_disk, attr) is getattr(implementation, attr), (name, attr)
            assert getattr(built[name], attr) is getattr(implementation, attr), (name, attr)
    assert built["sedna"].common is built["sedna.common"]
    assert built["sedna.common"].file_ops is built["sedna.common.file_ops"]
    assert built["sedna"].datasources is built["sedna.datasources"]


def test_plain_import_works_in_the_installed_environment(tmp_path: Path) -> None:
    probe = run_py("import core", cwd=tmp_path)
    if probe.returncode != 0:
        pytest.skip("the project is not installed (pip install -e .); PYTHONPATH-only run")
    res = run_py("""
        import sys
        import sedna.common.class_factory
        import sedna.datasources
        from sedna.common.file_ops import FileOps
        from core.common.class_factory import ClassFactory
        print(sedna.common.class_factory.ClassFactory is ClassFactory,
              sedna.__ianvs_shim__, "pandas" in sys.modules)
    """, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True", "False"]


def test_stand_in_yields_to_a_real_kubeedge_sedna(tmp_path: Path) -> None:
    real = fake_kubeedge_sedna(tmp_path / "site")
    code = """
        import sedna.common.class_factory as cf
        from core.compat import sedna_shim
        print(cf.__file__)
        print(hasattr(cf, "__ianvs_shim__"), sedna_shim.install())
    """
    # The repository (with the stand-in) comes first on the path: it must still hand over.
    res = run_py(code, cwd=tmp_path, path=[REPO, tmp_path / "site"])
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == str(real / "common" / "class_factory.py")
    assert lines[1] == "False False"


def test_broken_real_sedna_or_pypi_sedna_leave_the_stand_in(tmp_path: Path) -> None:
    fake_kubeedge_sedna(tmp_path / "broken", init="raise ImportError('needs colorlog')\n")
    fake_pypi_sedna(tmp_path / "pypi")
    code = """
        import sedna.datasources, sedna.common.class_factory as cf
        print(cf.__ianvs_shim__, cf.__file__)
    """
    for site, warned in ((tmp_path / "broken", True), (tmp_path / "pypi", False)):
        res = run_py(code, cwd=tmp_path, path=[REPO, site])
        assert res.returncode == 0, res.stderr
        assert res.stdout.split() == ["True", str(REPO / "sedna" / "common" /
                                                  "class_factory.py")]
        assert ("needs colorlog" in res.stderr) is warned


def test_runtime_shim_installs_module_objects_when_pypi_sedna_shadows(tmp_path: Path) -> None:
    """PyPI's sedna found first and no stand-in package installed (what setup.py does when
    PyPI's sedna was there first): plain imports fail, the loader's shim serves plugins.

    setuptools' editable finder would serve ``sedna.common`` from this repository even
    under PyPI's ``sedna``; it is removed from the child's import finders to model a
    regular install without the stand-in.
    """
    fake_pypi_sedna(tmp_path / "pypi")
    data = tmp_path / "index.txt"
    data.write_text("a 1\n")
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "from sedna.datasources import TxtDataParse\n"
        "from sedna.common.file_ops import FileOps\n"
        "from sedna.common.log import LOGGER\n"
        "from sedna.common.utils import get_host_ip\n"
        "from sedna.common.class_factory import ClassFactory, ClassType\n"
        "@ClassFactory.register(ClassType.GENERAL, alias='shimmed')\n"
        "class M:\n"
        "    def parse(self, path):\n"
        "        d = TxtDataParse(data_type='train'); d.parse(path); return d.x.tolist()\n")
    res = run_py(f"""
        import sys
        sys.meta_path[:] = [f for f in sys.meta_path
                            if "Editable" not in getattr(f, "__name__", type(f).__name__)]
        try:
            import sedna.common.class_factory
        except ImportError:
            print("plain import fails")
        from pathlib import Path
        from core.compat.plugin_loader import load_plugin
        from core.compat.sedna_file_ops import FileOps
        cls = load_plugin(Path({str(plugin)!r})).lookup("general", "shimmed")
        print(cls().parse({str(data)!r}))
        common = sys.modules["sedna.common"]
        print(common.file_ops.FileOps is FileOps, sys.modules["sedna"].datasources.__ianvs_shim__,
              hasattr(sys.modules["sedna"], "MATHS"))
    """, cwd=tmp_path, path=[tmp_path / "pypi", REPO])
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == ["plain import fails", "['a']", "True True False"]


SETUP_PACKAGES = """
    import json, runpy, setuptools
    captured = {}
    setuptools.setup = lambda **kw: captured.update(kw)
    runpy.run_path(%r, run_name="__main__")
    print(json.dumps(sorted(p for p in captured["packages"] if p.startswith("sedna"))))
"""


def test_setup_leaves_the_stand_in_out_when_another_sedna_is_installed(tmp_path: Path) -> None:
    code = SETUP_PACKAGES % str(REPO / "setup.py")

    def standin(path: list[Path], **env: str) -> list[str]:
        res = run_py(code, cwd=REPO, path=path, extra_env=env)  # pip runs it there
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout.splitlines()[-1])

    full = ["sedna", "sedna.common", "sedna.datasources"]
    baseline = standin([])
    if baseline != full:
        pytest.skip(f"this environment already has another sedna package ({baseline})")
    fake_kubeedge_sedna(tmp_path / "real")
    fake_pypi_sedna(tmp_path / "pypi")
    ours = tmp_path / "earlier_install"
    shutil.copytree(REPO / "sedna", ours / "sedna")
    assert standin([tmp_path / "real"]) == []
    assert standin([tmp_path / "pypi"]) == []
    assert standin([ours]) == full  # an earlier install of this stand-in is not foreign
    assert standin([tmp_path / "real"], IANVS_SEDNA_STANDIN="1") == full
    assert standin([], IANVS_SEDNA_STANDIN="0") == []
