"""`sync --mirror A --mirror B`: each upstream repository is read whole from the first mirror
that has it (hand-made mirrors in tmp_path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.sync.sources import MirrorsSource


def _put(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text, encoding="utf-8")


def test_each_repository_comes_whole_from_the_first_mirror_that_has_it(tmp_path: Path) -> None:
    shared, extra = tmp_path / "shared", tmp_path / "extra"
    _put(shared, "releases.tsv", "shared")
    _put(shared, "github/Ascend/pytorch/v2.6.0/a.py", "shared tag")
    _put(extra, "releases.tsv", "extra")
    _put(extra, "github/Ascend/pytorch/v9.9.9/a.py", "a tag the shared mirror lacks")
    _put(extra, "github/Ascend/mstt/abc/rules.yaml", "rules")
    src = MirrorsSource([shared, extra])
    assert src.name.startswith("mirror ")  # the snapshot's built_from stays "mirror"
    assert src.fetch("releases.tsv").text == "shared"
    assert src.fetch("github/Ascend/mstt/abc/rules.yaml").text == "rules"
    # a repository's refs are listed from the first mirror holding it; a ref only the extra
    # mirror holds is served when asked for
    assert src.list_dir("github/Ascend/pytorch") == ["v2.6.0"]
    assert src.fetch("github/Ascend/pytorch/v9.9.9/a.py").text == "a tag the shared mirror lacks"
    with pytest.raises(ScrapeError, match="not in mirror"):
        src.fetch("github/Ascend/pytorch/v1.0.0/a.py")
    # above the repositories, every mirror's entries
    assert src.list_dir("github/Ascend") == ["mstt", "pytorch"]
    with pytest.raises(ScrapeError, match="not in mirrors"):
        src.fetch("github/Ascend/op-plugin/x/y.py")


def test_each_pinned_commit_comes_whole_from_the_first_mirror_holding_it(tmp_path: Path
                                                                        ) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    _put(old, "github/Ascend/mstt/aaa/rules.yaml", "rules at aaa")
    _put(old, "github/Ascend/mstt/ccc/rules.yaml", "old mirror's ccc")
    _put(new, "github/Ascend/mstt/bbb/advice.json", "advice at bbb")
    _put(new, "github/Ascend/mstt/ccc/rules.yaml", "new mirror's ccc")
    _put(new, "github/Ascend/mstt/ccc/advice.json", "only in the new mirror's ccc")
    src = MirrorsSource([old, new])
    # two mirrors holding one repository at different commits both serve
    assert src.fetch("github/Ascend/mstt/aaa/rules.yaml").text == "rules at aaa"
    assert src.fetch("github/Ascend/mstt/bbb/advice.json").text == "advice at bbb"
    assert src.exists("github/Ascend/mstt/bbb/advice.json")
    assert src.list_dir("github/Ascend/mstt/bbb") == ["advice.json"]
    # one commit's files never mix: ccc is the first mirror's, whole
    assert src.fetch("github/Ascend/mstt/ccc/rules.yaml").text == "old mirror's ccc"
    assert not src.exists("github/Ascend/mstt/ccc/advice.json")
    # the other order: the other mirror's commit
    assert MirrorsSource([new, old]).fetch("github/Ascend/mstt/ccc/rules.yaml").text == \
        "new mirror's ccc"


def test_sync_takes_several_mirrors_and_refuses_a_missing_one(tmp_path: Path) -> None:
    from opcheck.core.errors import UsageError
    from opcheck.sync.pipeline import SyncOptions, _source

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    source, _ = _source(SyncOptions(mirror=(tmp_path / "a", tmp_path / "b")))
    assert isinstance(source, MirrorsSource)
    with pytest.raises(UsageError, match="does not exist"):
        _source(SyncOptions(mirror=(tmp_path / "a", tmp_path / "c")))
    with pytest.raises(UsageError, match="--mirror"):
        _source(SyncOptions())
