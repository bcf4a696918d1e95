"""Move a built pocket2 model folder through a channel that takes files under 16 MiB: split and join, SHA-256 checked.

    python scripts/pocket2_weights.py split BUILD_DIR PARTS_DIR     # every file; those over --part-mib in parts
    python scripts/pocket2_weights.py join PARTS_DIR MODEL_DIR      # e.g. MODEL_DIR = gradient_quarantine/pocket2_model
PARTS_DIR/manifest.json lists each file's parts and SHA-256; `join` refuses a missing part, a part of the wrong size,
a file whose joined bytes do not match, and a MODEL_DIR that already holds a different file of the same name.
"""
import argparse, hashlib, json, sys
from pathlib import Path


def sha256(data: bytes) -> str: return hashlib.sha256(data).hexdigest()


def split(src: Path, dst: Path, part_bytes: int) -> dict:
    dst.mkdir(parents=True, exist_ok=True)
    files = {}
    for f in sorted(p for p in src.iterdir() if p.is_file()):
        data = f.read_bytes()
        parts = [data[i:i + part_bytes] for i in range(0, len(data), part_bytes)] or [b""]
        names = [f.name] if len(parts) == 1 else [f"{f.name}.part{k:02d}" for k in range(len(parts))]
        for n, chunk in zip(names, parts): (dst/n).write_bytes(chunk)
        files[f.name] = {"sha256": sha256(data), "bytes": len(data), "parts": names,
                         "part_bytes": [len(c) for c in parts]}
    manifest = {"files": files}
    (dst/"manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def join(src: Path, dst: Path) -> dict:
    manifest = json.loads((src/"manifest.json").read_text())
    dst.mkdir(parents=True, exist_ok=True)
    for name, f in manifest["files"].items():
        chunks = []
        for part, size in zip(f["parts"], f["part_bytes"]):
            if not (src/part).exists(): sys.exit(f"missing part {src/part}")
            chunk = (src/part).read_bytes()
            if len(chunk) != size: sys.exit(f"{src/part} has {len(chunk)} bytes, the manifest says {size}")
            chunks.append(chunk)
        data = b"".join(chunks)
        if sha256(data) != f["sha256"]: sys.exit(f"{name}: joined bytes do not match the manifest's SHA-256")
        if (dst/name).exists() and sha256((dst/name).read_bytes()) != f["sha256"]:
            sys.exit(f"{dst/name} exists and differs: remove it first")
        (dst/name).write_bytes(data)
    return manifest


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("split", "join")); ap.add_argument("src"); ap.add_argument("dst")
    ap.add_argument("--part-mib", type=float, default=15.0)
    a = ap.parse_args()
    m = split(Path(a.src), Path(a.dst), int(a.part_mib * 2**20)) if a.action == "split" else join(Path(a.src),
                                                                                               Path(a.dst))
    for name, f in m["files"].items(): print(f"{name}: {f['bytes']} bytes in {len(f['parts'])} part(s), {f['sha256']}")
