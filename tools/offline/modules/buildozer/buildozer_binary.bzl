"""Stand-in for buildozer's `buildozer_binary` extension.

Bazel 7's built-in @bazel_tools module calls `use_repo(buildozer_binary, "buildozer_binary")`
(only `bazel mod tidy` runs it), so the extension must exist and create that repository even
though nothing here ever runs buildozer.
"""

def _empty_repo_impl(rctx):
    rctx.file("BUILD.bazel", "# buildozer is not available offline.\n")

_empty_repo = repository_rule(implementation = _empty_repo_impl)

def _buildozer_binary_impl(_mctx):
    _empty_repo(name = "buildozer_binary")

buildozer_binary = module_extension(implementation = _buildozer_binary_impl)
