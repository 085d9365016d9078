"""Apply the issue-6 fast-path proposal to a copy of the tree (argv[1])."""
import sys, os
root = sys.argv[1]
def edit(p, pairs):
    p = os.path.join(root, p); s = open(p).read()
    for old, new in pairs:
        assert old in s, (p, old[:60])
        s = s.replace(old, new)
    open(p, "w").write(s)
edit("omlx_profiles/profile.py", [
 ("from .schema_models import CompleteVariant\n", "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:  # pydantic only for type checkers: the estimate path must not import it\n    from .schema_models import CompleteVariant\n"),
 ('''    dtype: str  # "model" or a dtype name
''', '''    dtype: str  # "model" or a dtype name
    shape: tuple[int, ...] = field(default=(), compare=False)  # as declared (the peak model's state shapes)
'''),
 ("StateTensorSpec(t.name, prod(t.shape), t.dtype)", "StateTensorSpec(t.name, prod(t.shape), t.dtype, tuple(t.shape))"),
])
edit("omlx_profiles/registry.py", [
 ("from .loader import LoadedFile, VariantRecord, load_file, resolve_variants\n", ""),
 ("    files, issues = [], []\n    for p in paths:", "    from .loader import load_file  # pydantic: only when YAML is really loaded\n\n    files, issues = [], []\n    for p in paths:"),
 ("    reg = Registry()\n    all_issues", "    from .loader import VariantRecord, resolve_variants\n\n    reg = Registry()\n    all_issues"),
 ("def load_registry(extra_dirs: list[Path | str] | None = None, *, include_env: bool = True, strict: bool = True) -> Registry:\n",
  "def load_registry(extra_dirs: list[Path | str] | None = None, *, include_env: bool = True, strict: bool = True,\n                  compiled: bool = False) -> Registry:\n"),
 ("    return build_registry(sources, strict=strict)",
  "    if compiled and strict:  # read-only users (estimate, fit, chart): profiles without .variant, no pydantic\n        from .compiled import cached_registry\n\n        return cached_registry(sources, lambda: build_registry(sources, strict=True))\n    return build_registry(sources, strict=strict)"),
])
edit("omlx_profiles/cli/common.py", [
 ("def registry(args) -> Registry:\n    return load_registry([Path(d) for d in args.profiles])",
  "def registry(args) -> Registry:\n    # estimate / fit / chart only read profiles: the compiled registry spares them pydantic and YAML\n    fast = getattr(args, \"command\", None) in (\"estimate\", \"fit\", \"chart\")\n    if fast:\n        from .. import compiled\n\n        compiled.enable()  # kernel tables too\n    return load_registry([Path(d) for d in args.profiles], compiled=fast)"),
])
for p, mod, names in [("omlx_profiles/cli/cmd_validate.py", "..validate", "validate_paths"),
                      ("omlx_profiles/cli/cmd_schema.py", "..schema_export", "drifted, render, schemas, write_schemas")]:
    line = f"from {mod} import {names}\n"
    edit(p, [(line, ""), ("def run(args) -> int:\n", f"def run(args) -> int:\n    {line.strip()}\n\n")])
edit("omlx_profiles/peak/routes.py", [
 ("from ..yaml_io import load_yaml_text, read_text\n", ""),
 ("""    try:
        text = read_text(path)
    except OSError as e:""", """    try:
        path.stat()  # yaml and pydantic load only when the table is parsed, not from the compiled copy
    except OSError as e:"""),
 ("from ..schema_models import KernelRoutesFile, Route, RouteTable\n",
  "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..schema_models import KernelRoutesFile, Route, RouteTable\n"),
 ('''    data = load_yaml_text(text, str(path))
    try:
        f = KernelRoutesFile.model_validate(data)
    except Exception as e:  # pydantic ValidationError: name the file
        raise ProfileError_from(path, e) from None''',
  '''    def build():
        from ..schema_models import KernelRoutesFile
        from ..yaml_io import load_yaml_text, read_text

        data = load_yaml_text(read_text(path), str(path))
        try:
            return KernelRoutesFile.model_validate(data)
        except Exception as e:  # pydantic ValidationError: name the file
            raise ProfileError_from(path, e) from None

    from .. import compiled

    # the CLI's estimate / fit / chart read a compiled copy (validated once, then pydantic-free)
    f = compiled.cached_model(f"kernels-{backend}", [path], build) if compiled.enabled() else build()'''),
 ('''def ProfileError_from(''', '''def window_for(executor, q_len: int) -> int:
    """``Executor.window_for`` as a plain function, so a compiled (pydantic-free) table works too."""
    by_chunk = executor.inflight_ops_by_chunk
    for w in by_chunk:
        if q_len <= w.chunk:
            return w.ops
    return by_chunk[-1].ops if by_chunk else executor.inflight_ops


def ProfileError_from('''),
])
edit("omlx_profiles/peak/prefill.py", [
 ("kr.executor.window_for(request.chunk)", "window_for(kr.executor, request.chunk)"),
 ("ex.window_for(s)", "window_for(ex, s)"),
 ("from .routes import KernelRoutes, tiled_state", "from .routes import KernelRoutes, tiled_state, window_for"),
])
edit("omlx_profiles/peak/fast.py", [
 ("self.routes.executor.window_for(S)", "window_for(self.routes.executor, S)"),
 ("from .routes import _TILED_VERSION, KernelRoutes, tiled_state", "from .routes import _TILED_VERSION, KernelRoutes, tiled_state, window_for"),
])
print("applied")
