"""Which module notebooks import a package module whose notebook sorts after them (notebook names compared as strings).

Counts top-level and lazy imports in the exported module: `from .x import`, `from gradient_quarantine.x import`,
`import gradient_quarantine.x`. Run from the repository root: python scripts/notebook_order.py
"""
import json, re, sys
from pathlib import Path

IMPORT = re.compile(r"^\s*(?:from\s+(?:\.|gradient_quarantine\.)(\w+)\s+import|import\s+gradient_quarantine\.(\w+))",
                    re.M)

def module_notebooks(nbs: Path) -> dict[str, str]:
    "Module name -> the notebook (stem) that exports it."
    out = {}
    for nb in sorted(nbs.glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        code = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        found = re.search(r"#\|\s*default_exp\s+(\w+)", code)
        if found: out[found.group(1)] = nb.stem
    return out

def late_imports(root: Path) -> list[tuple[str, str, str]]:
    "(notebook, imported module, its notebook) for every import of a module whose notebook sorts later."
    where, out = module_notebooks(root/"nbs"), []
    for module, nb in where.items():
        code = (root/"gradient_quarantine"/f"{module}.py").read_text()
        imported = {a or b for a, b in IMPORT.findall(code)} - {module}
        out += [(nb, m, where[m]) for m in sorted(imported) if m in where and where[m] > nb]
    return sorted(out)

if __name__ == "__main__":
    for nb, m, other in late_imports(Path(sys.argv[1] if len(sys.argv) > 1 else ".")):
        print(f"{nb} imports {m} ({other})")
