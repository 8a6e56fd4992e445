"""scripts/check_layers.py: includes point down the layer stack, in src/, include/ and tools/; the
Python bindings include the public API only."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check_layers.py"


def tree(tmp_path: Path, files: dict) -> Path:
    for name, text in files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def check(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)


def test_the_repository_passes():
    r = check(REPO)
    assert r.returncode == 0, r.stderr


def test_downward_includes_pass(tmp_path):
    root = tree(tmp_path, {
        "src/ops/a.cc": '#include "core/status.h"\n#include "graph/ir.h"\n#include "ops/b.h"\n',
        "src/runtime/model.cc": '#include "streamline/streamline.h"\n#include "exec/executor.h"\n',
        "include/streamline/serving.h": '#include "streamline/streamline.h"\n#include "core/tensor.h"\n',
        "src/core/tensor.h": '#include "shape.h"\n',
        "src/core/logging.h": '#include "core/status.h"\n',
        "tools/cmd.cc": '#include "tools/cli.h"\n#include "serve/server.h"\n',
    })
    r = check(root)
    assert r.returncode == 0, r.stderr


def test_an_upward_include_in_src_fails(tmp_path):
    root = tree(tmp_path, {"src/ops/a.cc": '#include "runtime/scheduler.h"\n'})
    r = check(root)
    assert r.returncode == 1
    assert "src/ops/a.cc:1: layer 'ops' includes 'runtime/' from above" in r.stderr


def test_a_public_header_including_the_server_fails(tmp_path):
    root = tree(tmp_path, {"include/streamline/serving.h": '// x\n#include "serve/http_server.h"\n'})
    r = check(root)
    assert r.returncode == 1
    assert "include/streamline/serving.h:2: layer 'streamline' includes 'serve/' from above" in r.stderr


def test_a_public_header_including_an_internal_one_fails(tmp_path):
    # Downward, but not installed: a program built against the installed tree could not find it.
    root = tree(tmp_path, {"include/streamline/streamline.h": '#include "core/tensor.h"\n#include "plan/planner.h"\n'})
    r = check(root)
    assert r.returncode == 1
    assert "include/streamline/streamline.h:2: public header includes 'plan/planner.h', which is not installed" in r.stderr
    root = tree(tmp_path, {"include/streamline/streamline.h": '#include "core/logging.h"\n'})
    assert check(root).returncode == 1


def test_a_public_core_header_including_by_layer_path_fails(tmp_path):
    root = tree(tmp_path, {"src/core/tensor.h": '#include "core/shape.h"\n'})
    r = check(root)
    assert r.returncode == 1
    assert "src/core/tensor.h:1: public core header includes 'core/shape.h'" in r.stderr


def test_a_library_including_the_cli_fails(tmp_path):
    root = tree(tmp_path, {"src/serve/a.cc": '#include "tools/cli_common.h"\n'})
    r = check(root)
    assert r.returncode == 1
    assert "layer 'serve' includes 'tools/'" in r.stderr


def test_python_bindings_include_the_public_api_only(tmp_path):
    ok = tree(tmp_path / "ok", {"python/src/m.cc": '#include "bindings.h"\n#include "streamline/serving.h"\n'})
    assert check(ok).returncode == 0, check(ok).stderr
    root = tree(tmp_path / "bad", {"python/src/m.cc": '#include "streamline/streamline.h"\n#include "core/tensor.h"\n'})
    r = check(root)
    assert r.returncode == 1
    assert "python/src/m.cc:2: layer 'python' may include only streamline/, not 'core/'" in r.stderr


def test_an_empty_tree_is_an_error(tmp_path):
    r = check(tmp_path)
    assert r.returncode == 1
    assert "no sources" in r.stderr
