"""Atomic writes: complete content, no temporary file left, the old file kept on failure."""

from __future__ import annotations

import os
import stat

import pytest

from novabench.io import atomic_path, atomic_write_bytes, atomic_write_text


def test_text_is_written_into_new_parent_folders(tmp_path):
    out = tmp_path / "a" / "b" / "scores.json"
    assert atomic_write_text(out, "héllo\r\nwörld\n") == out
    assert out.read_bytes() == "héllo\r\nwörld\n".encode()  # utf-8, newlines as given
    assert sorted(p.name for p in out.parent.iterdir()) == ["scores.json"]


def test_bytes_replace_an_existing_file(tmp_path):
    out = tmp_path / "table.parquet"
    out.write_bytes(b"old")
    atomic_write_bytes(out, b"\x00new", fsync=True)
    assert out.read_bytes() == b"\x00new"
    assert os.listdir(tmp_path) == ["table.parquet"]


def test_path_writers_see_a_temporary_name_next_to_the_target(tmp_path):
    out = tmp_path / "data.parquet"
    with atomic_path(out) as tmp:
        assert tmp == tmp_path / "data.parquet.tmp"
        assert not out.exists()
        tmp.write_text("rows")
    assert out.read_text() == "rows" and not tmp.exists()


class Boom(Exception):
    pass


@pytest.mark.parametrize("unique", [False, True])
def test_a_failed_write_keeps_the_original_and_leaves_no_temporary(tmp_path, unique):
    out = tmp_path / "manifest.json"
    out.write_text("original")
    with pytest.raises(Boom), atomic_path(out, unique=unique) as tmp:
        tmp.write_text("half of the new con")
        raise Boom
    assert out.read_text() == "original"
    assert os.listdir(tmp_path) == ["manifest.json"]


def test_a_failed_first_write_leaves_nothing(tmp_path):
    out = tmp_path / "new.json"
    with pytest.raises(Boom), atomic_path(out) as tmp:
        tmp.write_text("partial")
        raise Boom
    assert os.listdir(tmp_path) == []


def test_writing_nothing_is_an_error_and_keeps_the_original(tmp_path):
    out = tmp_path / "kept.txt"
    out.write_text("original")
    with pytest.raises(FileNotFoundError), atomic_path(out):
        pass
    assert out.read_text() == "original"


def test_unique_names_are_hidden_fresh_and_owner_only(tmp_path):
    out = tmp_path / "entry.json"
    with atomic_path(out, unique=True, suffix=".partial") as first:
        with atomic_path(out, unique=True, suffix=".partial") as second:
            assert first != second
            assert second.name.startswith(".entry.json.") and second.name.endswith(".partial")
            second.write_text("second")
        assert stat.S_IMODE(first.stat().st_mode) == 0o600
        first.write_text("first")
    assert out.read_text() == "first"
    assert os.listdir(tmp_path) == ["entry.json"]


# --- a full disk: one line naming the folder, the previous file kept ------------------------


def test_a_full_disk_is_one_line_naming_the_folder_and_keeps_the_old_file(tmp_path):
    from novabench.errors import NovaError

    out = tmp_path / "scores.json"
    out.write_text("finished")
    # Writes through this name reach /dev/full, which answers every write with ENOSPC.
    (tmp_path / "scores.json.tmp").symlink_to("/dev/full")
    with pytest.raises(NovaError) as err:
        atomic_write_text(out, "x" * 100_000)
    message = str(err.value)
    assert message.startswith(f"no space left on the device of {tmp_path} (")
    assert message.endswith(
        "fix: free space there or move results/ to a larger disk, then run the same command "
        "again (finished outputs are kept; only the failed jobs re-run)"
    )
    assert out.read_text() == "finished"
    assert os.listdir(tmp_path) == ["scores.json"]


def test_a_full_disk_says_how_much_the_output_had_written(tmp_path):
    import errno

    from novabench.errors import NovaError

    needs = r"; nova\.parquet needs more than 3\.0 MiB; fix: "
    with pytest.raises(NovaError, match=needs), atomic_path(tmp_path / "nova.parquet") as tmp:
        tmp.write_bytes(b"\0" * 3 * 2**20)
        raise OSError(errno.ENOSPC, "No space left on device")
    assert os.listdir(tmp_path) == []
