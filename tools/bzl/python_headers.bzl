"""Module extension: C/C++ header repositories found through the host's Python packages.

Each tag declares one repository holding a `cc_library` named like the repository, whose
headers are a symlink to an include folder that an installed, pinned Python package reports
(tools/bzl/locate_headers.py does the asking). Nothing is downloaded: pip installed the
packages from requirements*.txt, and the versions found are written to `:version.bzl`.

    headers = use_extension("//tools/bzl:python_headers.bzl", "python_headers")
    headers.python(name = "python_headers")                      # Python.h of `python3`
    headers.pybind11(name = "pybind11")                          # pybind11.get_include()
    headers.wheel(name = "cudnn_headers", dist = "nvidia-cudnn-cu13", header = "cudnn_graph.h")
"""

_LOCATOR = Label("//tools/bzl:locate_headers.py")

def _include_repo_impl(rctx):
    python = rctx.which("python3")
    if not python:
        fail("@%s: no python3 on PATH; tools/bazel puts the host Python first" % rctx.name)
    result = rctx.execute([python, rctx.path(_LOCATOR)] + rctx.attr.query)
    if result.return_code != 0:
        fail("@%s: cannot locate headers: %s" % (rctx.name, result.stderr.strip()))
    found = json.decode(result.stdout)
    rctx.symlink(found["include"], "include")
    # VERSION, INCLUDE and, for the Python headers, TAG (cp311) and EXT_SUFFIX
    rctx.file("version.bzl", "".join([
        "%s = %r\n" % (key.upper(), found[key])
        for key in sorted(found)
    ]))
    rctx.file("BUILD.bazel", """\
cc_library(
    name = {name},
    hdrs = glob(["include/**"], exclude = ["include/**/*.so*", "include/**/*.a"]),
    includes = ["include"],
    deps = {deps},
    visibility = ["//visibility:public"],
)
""".format(name = repr(rctx.attr.library_name), deps = repr(rctx.attr.cc_deps)))

_include_repo = repository_rule(
    implementation = _include_repo_impl,
    attrs = {
        "query": attr.string_list(mandatory = True),
        "library_name": attr.string(mandatory = True),
        "cc_deps": attr.string_list(),
    },
    # Re-ask when a different Python (or venv) would answer.
    environ = ["PATH", "VIRTUAL_ENV"],
    local = True,
)

_python = tag_class(attrs = {"name": attr.string(mandatory = True)})
_pybind11 = tag_class(attrs = {
    "name": attr.string(mandatory = True),
    "python_headers": attr.string(doc = "repository of the Python headers pybind11 needs"),
})
_wheel = tag_class(attrs = {
    "name": attr.string(mandatory = True),
    "dist": attr.string(mandatory = True, doc = "pip distribution name"),
    "header": attr.string(mandatory = True, doc = "a header whose folder is the include root"),
    "deps": attr.string_list(doc = "labels of header libraries this one includes"),
})

def _python_headers_impl(mctx):
    for mod in mctx.modules:
        for tag in mod.tags.python:
            _include_repo(name = tag.name, library_name = tag.name, query = ["python"])
        for tag in mod.tags.pybind11:
            deps = ["@%s//:%s" % (tag.python_headers, tag.python_headers)] if tag.python_headers else []
            _include_repo(name = tag.name, library_name = tag.name, query = ["pybind11"], cc_deps = deps)
        for tag in mod.tags.wheel:
            _include_repo(
                name = tag.name,
                library_name = tag.name,
                query = ["wheel", tag.dist, tag.header],
                cc_deps = tag.deps,
            )

python_headers = module_extension(
    implementation = _python_headers_impl,
    tag_classes = {"python": _python, "pybind11": _pybind11, "wheel": _wheel},
)
