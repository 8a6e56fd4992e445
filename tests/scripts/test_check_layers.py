"""scripts/check_layers.py: includes point down the layer stack, in src/, include/ and tools/; the
Python bindings include the public API only; every folder of src/ and include/ has a place."""

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
        "include/streamline/streamline.h": '#include "runtime/x.h"\n#include "core/tensor.h"\n',
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


def test_the_public_api_ranks_with_runtime(tmp_path):
    # exec sits below the public API, serve above it: the order is core graph ops plan exec
    # runtime=streamline serve tools.
    ok = tree(tmp_path / "ok", {"src/serve/a.cc": '#include "streamline/serving.h"\n',
                                "src/runtime/b.cc": '#include "streamline/pipeline.h"\n'})
    assert check(ok).returncode == 0, check(ok).stderr
    root = tree(tmp_path / "bad", {"src/exec/a.cc": '#include "streamline/streamline.h"\n'})
    r = check(root)
    assert r.returncode == 1
    assert "src/exec/a.cc:1: layer 'exec' includes 'streamline/' from above" in r.stderr


def test_angle_bracket_includes_are_checked_too(tmp_path):
    root = tree(tmp_path, {"src/plan/a.cc": '#include <vector>\n#include <runtime/model.h>\n'})
    r = check(root)
    assert r.returncode == 1
    assert "src/plan/a.cc:2: layer 'plan' includes 'runtime/' from above" in r.stderr


def test_a_folder_of_src_outside_the_order_fails(tmp_path):
    root = tree(tmp_path, {"src/ops/a.cc": '#include "core/status.h"\n',
                           "src/cache/c.cc": '#include "core/status.h"\n',
                           "src/cache/d.h": '\n'})
    r = check(root)
    assert r.returncode == 1
    assert "src/cache/ is not a layer of the order (core, graph, ops, plan, exec, runtime, streamline, serve, tools)" in r.stderr
    assert r.stderr.count("src/cache/") == 1  # once per folder, not per file
    root = tree(tmp_path / "tools_in_src", {"src/tools/x.cc": '\n'})
    assert check(root).returncode == 1


def test_a_header_outside_include_streamline_fails(tmp_path):
    root = tree(tmp_path, {"include/streamline/streamline.h": '\n', "include/extra.h": '\n'})
    r = check(root)
    assert r.returncode == 1
    assert "include/extra.h: public headers live in include/streamline/" in r.stderr


def test_an_empty_tree_is_an_error(tmp_path):
    r = check(tmp_path)
    assert r.returncode == 1
    assert "no sources" in r.stderr
