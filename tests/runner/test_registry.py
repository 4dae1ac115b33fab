"""The plugin registry, the sedna shim and the path-unique loader."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from core.common.class_factory import ClassFactory, ClassType
from core.common.errors import PluginError, RegistryError
from core.compat.plugin_loader import load_plugin

PLUGIN = """
from sedna.common.class_factory import ClassFactory, ClassType
from sedna.common.config import Context
from core.common.log import LOGGER

@ClassFactory.register(ClassType.GENERAL, alias="gen")
class Model:
    tag = {tag!r}
"""


def test_two_basemodel_files_with_the_same_alias_both_load(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "basemodel.py", tmp_path / "b" / "basemodel.py"
    for path, tag in ((a, "A"), (b, "B")):
        path.parent.mkdir()
        path.write_text(PLUGIN.format(tag=tag))
    assert load_plugin(a).lookup(ClassType.GENERAL, "gen").tag == "A"
    assert load_plugin(b).lookup(ClassType.GENERAL, "gen").tag == "B"
    with pytest.raises(RegistryError, match="registered by several modules"):
        ClassFactory.get_cls(ClassType.GENERAL, "gen")
    assert str(tmp_path / "a") not in sys.path


def test_unknown_alias_suggests_near_match(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(PLUGIN.format(tag="x").replace('"gen"', '"generator"'))
    with pytest.raises(RegistryError, match="did you mean 'generator'"):
        load_plugin(path).lookup(ClassType.GENERAL, "generatr")


def test_same_module_registering_two_objects_under_one_alias_fails(tmp_path: Path) -> None:
    path = tmp_path / "dup.py"
    path.write_text(PLUGIN.format(tag="x") + "\n@ClassFactory.register(ClassType.GENERAL, "
                    "alias='gen')\nclass Other:\n    pass\n")
    with pytest.raises(PluginError, match="registered twice"):
        load_plugin(path)


def test_broken_plugin_names_its_line_and_cleans_sys_path(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("x = 1\nraise ValueError('boom')\n")
    with pytest.raises(PluginError) as err:
        load_plugin(path)
    assert f"{path}:2" in str(err.value) and "boom" in str(err.value)
    assert str(tmp_path) not in sys.path


def test_plugin_can_import_its_sibling(tmp_path: Path) -> None:
    (tmp_path / "helper_mod_xyz.py").write_text("VALUE = 42\n")
    path = tmp_path / "uses.py"
    path.write_text("from helper_mod_xyz import VALUE\n" + PLUGIN.format(tag="s").replace(
        "tag = 's'", "tag = VALUE"))
    assert load_plugin(path).lookup(ClassType.GENERAL, "gen").tag == 42


def test_sedna_api_surface() -> None:
    @ClassFactory.register(ClassType.HEM)
    def my_hem_fn_for_test() -> None:
        pass

    assert ClassFactory.is_exists(ClassType.HEM)
    assert ClassFactory.is_exists(ClassType.HEM, "my_hem_fn_for_test")
    assert ClassFactory.get_cls(ClassType.HEM, "my_hem_fn_for_test") is my_hem_fn_for_test
    with pytest.raises(ValueError):
        ClassFactory.get_cls(ClassType.HEM, None)
    assert ClassType.MTL == "multi_task_learening"
    assert ClassFactory.register_cls(my_hem_fn_for_test, ClassType.HEM) is my_hem_fn_for_test


def test_real_sedna_registry_is_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KubeEdge Sedna cannot be installed from this machine's registries (PyPI's 'sedna' is
    an unrelated package), so a minimal package with Sedna's registry layout stands in."""
    from core.compat import sedna_shim

    pkg = tmp_path / "site" / "sedna" / "common"
    pkg.mkdir(parents=True)
    (pkg.parent / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "class_factory.py").write_text(
        "class ClassType:\n    GENERAL = 'general'\n"
        "class ClassFactory:\n    __registry__ = {}\n"
        "    @classmethod\n    def register(cls, type_name='general', alias=None):\n"
        "        def w(obj):\n"
        "            cls.__registry__.setdefault(type_name, {})[alias or obj.__name__] = obj\n"
        "            return obj\n        return w\n")
    (pkg / "config.py").write_text("class Context:\n    pass\n")
    saved = {k: v for k, v in sys.modules.items() if k == "sedna" or k.startswith("sedna.")}
    for key in saved:
        del sys.modules[key]
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    try:
        assert sedna_shim.install() is False
        plugin = tmp_path / "real_sedna_plugin.py"
        plugin.write_text(PLUGIN.format(tag="real").replace(
            "from core.common.log import LOGGER\n", "").replace('"gen"', '"realgen"'))
        assert load_plugin(plugin).lookup(ClassType.GENERAL, "realgen").tag == "real"
    finally:
        for key in [k for k in sys.modules if k == "sedna" or k.startswith("sedna.")]:
            del sys.modules[key]
        sys.modules.update(saved)


def test_lazy_entries_resolve_on_first_lookup() -> None:
    ClassFactory.register_lazy(ClassType.GENERAL, "lazy_json_dumps_for_test", "json:dumps")
    import json

    assert ClassFactory.is_exists(ClassType.GENERAL, "lazy_json_dumps_for_test")
    assert ClassFactory.get_cls(ClassType.GENERAL, "lazy_json_dumps_for_test") is json.dumps


def test_generators_live_in_the_one_registry() -> None:
    from core.generation import create_generator, generator_class

    assert "embedded" in ClassFactory.aliases(ClassType.GENERATOR)
    assert generator_class("broken").__name__ == "BrokenGenerator"
    with pytest.raises(RegistryError, match="did you mean 'canonical'"):
        create_generator("canonicl")
