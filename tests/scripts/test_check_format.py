"""scripts/check_format.sh: the C++ files changed since a base commit must match .clang-format;
files the change did not touch may stay as they are."""

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check_format.sh"

FORMATTED = "int add(int a, int b) {\n  return a + b;\n}\n"
UNFORMATTED = "int   add(int a,int b){return a+b;}\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def check(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=repo, capture_output=True, text=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "t")
    shutil.copy(REPO / ".clang-format", tmp_path / ".clang-format")
    (tmp_path / "src").mkdir()
    # Unformatted before the base: not this change's business.
    (tmp_path / "src" / "old.cc").write_text(UNFORMATTED)
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "base")
    return tmp_path


def base_of(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def test_clang_format_is_installed():
    # scripts/setup.sh installs it; the check must not pass by not running.
    assert shutil.which("clang-format"), "clang-format is missing: run scripts/setup.sh"


def test_untouched_unformatted_files_pass(repo):
    base = base_of(repo)
    (repo / "README").write_text("not C++\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "docs")
    r = check(repo, base)
    assert r.returncode == 0, r.stderr
    assert "0 C++ files changed" in r.stdout


def test_a_formatted_change_passes(repo):
    base = base_of(repo)
    (repo / "src" / "new.cc").write_text(FORMATTED)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "new")
    r = check(repo, base)
    assert r.returncode == 0, r.stderr
    assert "1 C++ files changed" in r.stdout


def test_an_unformatted_change_fails_with_the_file_and_a_diff(repo):
    base = base_of(repo)
    (repo / "src" / "new.cc").write_text(FORMATTED)
    (repo / "src" / "bad.h").write_text(UNFORMATTED)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "two files")
    r = check(repo, base)
    assert r.returncode == 1
    assert "1 of 2 C++ files changed since" in r.stderr
    assert "  src/bad.h\n" in r.stderr
    assert "src/new.cc" not in r.stderr
    assert "-int   add(int a,int b){return a+b;}" in r.stderr
    assert "+int add(int a, int b) {" in r.stderr


def test_uncommitted_and_untracked_files_count(repo):
    base = base_of(repo)
    (repo / "src" / "old.cc").write_text(UNFORMATTED + "int   x;\n")  # modified, not committed
    (repo / "src" / "fresh.cu").write_text(UNFORMATTED)  # untracked
    r = check(repo, base)
    assert r.returncode == 1
    assert "  src/old.cc\n" in r.stderr and "  src/fresh.cu\n" in r.stderr


def test_work_forked_before_the_base_is_checked_once_touched_again(repo):
    fork = base_of(repo)
    git(repo, "checkout", "-qb", "side")
    (repo / "src" / "side.cc").write_text(UNFORMATTED)  # written before the check existed
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "side")
    git(repo, "checkout", "-q", "-")
    (repo / "src" / "check.cc").write_text(FORMATTED)  # the commit that adds the check
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "the check")
    base = base_of(repo)
    git(repo, "merge", "-q", "--no-edit", "side")
    r = check(repo, base)
    assert r.returncode == 0, r.stderr
    (repo / "src" / "side.cc").write_text(UNFORMATTED + "int   y;\n")
    git(repo, "commit", "-qam", "touch side.cc after the check")
    r = check(repo, base)
    assert r.returncode == 1
    assert "  src/side.cc\n" in r.stderr
    assert fork != base


def test_a_deleted_file_is_not_checked(repo):
    base = base_of(repo)
    git(repo, "rm", "-q", "src/old.cc")
    git(repo, "commit", "-qm", "rm")
    r = check(repo, base)
    assert r.returncode == 0, r.stderr


def test_a_bad_base_is_an_error(repo):
    r = check(repo, "no-such-commit")
    assert r.returncode == 2
    assert "is not a commit" in r.stderr
    assert check(repo).returncode == 2
