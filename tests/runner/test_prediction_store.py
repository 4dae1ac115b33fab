"""The prediction log holds offsets, not values (flat memory), and still behaves as a list."""
from __future__ import annotations

from pathlib import Path

import pytest

from core.testcasecontroller.predictions import KeyList, PredictionStore, sample_key


def _keys(n: int) -> KeyList:
    return KeyList(sample_key({"q": i}) for i in range(n))


def test_predictions_are_read_back_in_dataset_order(tmp_path: Path) -> None:
    store = PredictionStore(tmp_path, _keys(4))
    for index in (2, 0, 3, 1):  # stored in completion order
        store.put(index, {"answer": index, "tuple": (index,)})
    ordered = store.ordered()
    assert len(ordered) == 4 and ordered[-1] == {"answer": 3, "tuple": [3]}
    assert [p["answer"] for p in ordered] == [0, 1, 2, 3]
    assert ordered[1:3] == [{"answer": 1, "tuple": [1]}, {"answer": 2, "tuple": [2]}]
    with pytest.raises(IndexError):
        ordered[4]
    store.close()


def test_reopened_store_resumes_and_a_later_line_wins(tmp_path: Path) -> None:
    keys = _keys(3)
    store = PredictionStore(tmp_path, keys)
    store.put(0, "old")
    store.put(0, "new")
    store.close()
    with (tmp_path / PredictionStore.FILE_NAME).open("ab") as fh:
        fh.write(b'{"index": 1, "sample_key": "')  # torn by a kill
    again = PredictionStore(tmp_path, keys)
    assert again.pending() == [1, 2] and again.stored == 1
    assert again.ordered({1: "p1", 2: "p2"})[:] == ["new", "p1", "p2"]
    with pytest.raises(KeyError):
        again.ordered({1: "p1"})  # index 2 is neither stored nor provisional
    again.close()


def test_a_changed_input_is_not_taken_from_the_log(tmp_path: Path) -> None:
    store = PredictionStore(tmp_path, _keys(2))
    store.put(0, "a")
    store.put(1, "b")
    store.close()
    changed = KeyList([sample_key({"q": 0}), sample_key({"q": "changed"})])
    again = PredictionStore(tmp_path, changed)
    assert again.pending() == [1]
    again.close()


def test_key_list_packs_keys_and_rejects_other_strings() -> None:
    keys = _keys(3)
    assert list(keys) == [sample_key({"q": i}) for i in range(3)]
    with pytest.raises(ValueError):
        KeyList(["not-a-key"])
