"""`python_wheel`: a wheel of some py_library targets, everything they need, and compiled
extension modules.

Stands in for rules_python's `py_wheel`, whose wheelmaker tool Debian's packaged
rules_python 0.22.1 does not ship. It packs the `.py` sources of the whole dependency tree
(PyInfo.transitive_sources) and the shared objects of `extensions`; with extensions the
wheel is a platform wheel for the Python whose headers they were compiled against
(`python_tag`, `ext_suffix`), tagged with the oldest glibc the objects load on. The tag
is only known once the objects exist, so the output is a folder holding the one wheel
under its standard file name. tools/wheel/build_wheel.py writes the archive.
"""

def _python_wheel_impl(ctx):
    out = ctx.actions.declare_directory(ctx.label.name)
    sources = depset(transitive = [dep[PyInfo].transitive_sources for dep in ctx.attr.deps])
    objects = ctx.files.extensions
    listing = ctx.actions.declare_file(ctx.label.name + ".files")
    ctx.actions.write(listing, "".join([
        "%s\t%s\n" % (f.short_path, f.path)
        for f in sources.to_list() + objects
    ]))

    args = ctx.actions.args()
    args.add("--out-dir", out.path)
    args.add("--name", ctx.attr.distribution)
    args.add("--version", ctx.attr.version)
    args.add("--files", listing)
    args.add("--summary", ctx.attr.summary)
    args.add("--python-requires", ctx.attr.python_requires)
    args.add("--require-prefix", ctx.attr.require_prefix)
    args.add_all(ctx.attr.strip_path_prefixes, before_each = "--strip-prefix")
    args.add_all(ctx.attr.requires, before_each = "--requires")
    for extra, requirements in sorted(ctx.attr.extra_requires.items()):
        for requirement in requirements:  # one per flag: specifiers hold commas
            args.add("--extra", "%s=%s" % (extra, requirement))
    inputs = [listing] + objects
    if ctx.file.readme:
        args.add("--readme", ctx.file.readme)
        inputs.append(ctx.file.readme)
    if ctx.attr.license_expression:
        args.add("--license-expression", ctx.attr.license_expression)
    for f in ctx.files.license_files:
        args.add("--license-file", f)
        inputs.append(f)
    if objects:
        args.add("--python-tag", ctx.attr.python_tag)
        args.add("--ext-suffix", ctx.attr.ext_suffix)

    ctx.actions.run(
        executable = ctx.executable._builder,
        arguments = [args],
        inputs = depset(inputs, transitive = [sources]),
        outputs = [out],
        mnemonic = "PythonWheel",
        progress_message = "Packing wheel %{output}",
    )
    return [DefaultInfo(files = depset([out]))]

python_wheel = rule(
    implementation = _python_wheel_impl,
    attrs = {
        "deps": attr.label_list(providers = [PyInfo], mandatory = True),
        "extensions": attr.label_list(allow_files = [".so"], doc = "compiled extension modules"),
        "distribution": attr.string(mandatory = True),
        "version": attr.string(mandatory = True),
        "summary": attr.string(),
        "python_requires": attr.string(),
        "requires": attr.string_list(),
        "extra_requires": attr.string_list_dict(),
        "readme": attr.label(allow_single_file = True, doc = "the long description (Markdown)"),
        "license_expression": attr.string(),
        "license_files": attr.label_list(allow_files = True),
        "python_tag": attr.string(doc = "e.g. cp311: the interpreter the extensions are built for"),
        "ext_suffix": attr.string(doc = "that interpreter's extension file suffix"),
        "strip_path_prefixes": attr.string_list(),
        "require_prefix": attr.string(doc = "every file must land under this path"),
        "_builder": attr.label(
            default = "//tools/wheel:build_wheel",
            executable = True,
            cfg = "exec",
        ),
    },
)
