"""`python_wheel`: a pure-Python wheel of some py_library targets and everything they need.

Stands in for rules_python's `py_wheel`, whose wheelmaker tool Debian's packaged
rules_python 0.22.1 does not ship. It packs the `.py` sources of the whole dependency tree
(PyInfo.transitive_sources), so data such as compiled extensions stay out and the wheel is
`py3-none-any`. tools/wheel/build_wheel.py writes the archive.
"""

def _python_wheel_impl(ctx):
    out = ctx.actions.declare_file("%s-%s-py3-none-any.whl" % (
        ctx.attr.distribution.replace("-", "_"),
        ctx.attr.version,
    ))
    sources = depset(transitive = [dep[PyInfo].transitive_sources for dep in ctx.attr.deps])
    listing = ctx.actions.declare_file(ctx.label.name + ".files")
    ctx.actions.write(listing, "".join([
        "%s\t%s\n" % (f.short_path, f.path)
        for f in sources.to_list()
    ]))

    args = ctx.actions.args()
    args.add("--out", out)
    args.add("--name", ctx.attr.distribution)
    args.add("--version", ctx.attr.version)
    args.add("--files", listing)
    args.add("--summary", ctx.attr.summary)
    args.add("--python-requires", ctx.attr.python_requires)
    args.add("--require-prefix", ctx.attr.require_prefix)
    args.add_all(ctx.attr.strip_path_prefixes, before_each = "--strip-prefix")
    for extra, requirements in sorted(ctx.attr.extra_requires.items()):
        args.add("--extra", "%s=%s" % (extra, ",".join(requirements)))

    ctx.actions.run(
        executable = ctx.executable._builder,
        arguments = [args],
        inputs = depset([listing], transitive = [sources]),
        outputs = [out],
        mnemonic = "PythonWheel",
        progress_message = "Packing wheel %{output}",
    )
    return [DefaultInfo(files = depset([out]))]

python_wheel = rule(
    implementation = _python_wheel_impl,
    attrs = {
        "deps": attr.label_list(providers = [PyInfo], mandatory = True),
        "distribution": attr.string(mandatory = True),
        "version": attr.string(mandatory = True),
        "summary": attr.string(),
        "python_requires": attr.string(),
        "extra_requires": attr.string_list_dict(),
        "strip_path_prefixes": attr.string_list(),
        "require_prefix": attr.string(doc = "every file must land under this path"),
        "_builder": attr.label(
            default = "//tools/wheel:build_wheel",
            executable = True,
            cfg = "exec",
        ),
    },
)
