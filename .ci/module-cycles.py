#!/usr/bin/env python3
"""Fails when a crate's modules import each other in a circle.

Usage: .ci/module-cycles.py [--list] CRATE_SRC_DIR...   (say, velocity-policy-runtime/src)

The module tree is read by following `mod` declarations from `lib.rs` (`#[path]` included).
An edge is a path a file names: its `use` statements, and the paths written in its code
(`crate::observe::millis` in a `serialize_with`, `crate::chaos::Chaos` in a field), with
comments left out. A path through a re-export (`crate::Breaker`, `super::ResponseFuture`) counts
for the module that defines the item.

Circles are looked for at every level: between the crate's top-level modules (a file in
`layer/breaker/` counts for `layer`), and between the files of each folder module
(`queue/stream.rs` and `queue/worker.rs`). A child naming its parent's own items, and a parent
naming its children, is the module's shape, not a circle.

Exit status 1 when there is a circle, each printed with the paths that close it. `--list`
prints every module's edges too.
"""

import os
import re
import sys
from collections import defaultdict

USE = re.compile(r"\buse\s+([^;]+);", re.S)
PATH = re.compile(r"(?<![\w:$])((?:crate|super|self)(?:::(?:\w+|\*))+)")
MOD = re.compile(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
PATH_ATTR = re.compile(r"#\[path\s*=\s*\"([^\"]+)\"\]")
PUB_USE = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", re.S)
PUB_ITEM = re.compile(
    r"\bpub(?:\([^)]*\))?\s+(?:const\s+fn|async\s+fn|unsafe\s+fn|fn|struct|enum|trait|type|const|static|mod|union)\s+(\w+)"
)


def strip_comments(text):
    """The text without comments, strings kept (a path in a string is still a dependency)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif c == "'" and i + 2 < n and (text[i + 2] == "'" or text[i + 1] == "\\"):
            # A char literal ('"' would otherwise open a string); lifetimes are left alone.
            j = text.find("'", i + 2)
            out.append(" ")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use(tree):
    """`a::{b, c::{d, e as f}}` -> [[a, b], [a, c, d], [a, c, e]] (aliases dropped)."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))

    def split_top(s):
        parts, depth, start = [], 0, 0
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:k])
                start = k + 1
        parts.append(s[start:])
        return [p for p in parts if p]

    def go(prefix, s):
        brace = s.find("{")
        if brace < 0:
            return [prefix + [x for x in s.split("::") if x]]
        head = [x for x in s[:brace].split("::") if x]
        paths = []
        for part in split_top(s[brace + 1 : s.rfind("}")]):
            paths += go(prefix + head, part)
        return paths

    return go([], tree)


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # module path (tuple) -> file
        self.children = defaultdict(set)  # module -> child module names
        self.text = {}  # module -> stripped text
        self.load((), os.path.join(src, "lib.rs"), os.path.join(src))
        self.reexports = {m: self.read_reexports(m) for m in self.files}

    def load(self, module, path, child_dir):
        with open(path, encoding="utf-8") as f:
            text = strip_comments(f.read())
        self.files[module] = path
        self.text[module] = text
        for m in MOD.finditer(text):
            attr = PATH_ATTR.search(m.group(1))
            attr_path, name = (attr.group(1) if attr else None), m.group(2)
            if attr_path:
                child = os.path.normpath(os.path.join(os.path.dirname(path), attr_path))
                grand_dir = os.path.join(os.path.dirname(child), name)
            else:
                child = os.path.join(child_dir, name + ".rs")
                grand_dir = os.path.join(child_dir, name)
                if not os.path.exists(child):
                    child = os.path.join(child_dir, name, "mod.rs")
            if not os.path.exists(child):
                # Never skipped quietly: a module the checker cannot read is one it cannot check.
                sys.exit(f"{path}: `mod {name};` names no file the checker can find ({child})")
            self.children[module].add(name)
            self.load(module + (name,), child, grand_dir)

    def read_reexports(self, module):
        """Names this module re-exports, each to the absolute path it names (globs too)."""
        found = {}
        for m in PUB_USE.finditer(self.text[module]):
            for segs in expand_use(m.group(1)):
                absolute = self.absolute(module, segs)
                if absolute is None:
                    continue
                if segs[-1] == "*":
                    target = self.module_of(absolute[:-1])
                    if target in self.text:
                        for item in PUB_ITEM.findall(self.text[target]):
                            found.setdefault(item, target + (item,))
                    continue
                found[segs[-1]] = absolute
        return found

    def absolute(self, module, segs):
        """The absolute path `segs` names from `module`, or None for another crate's."""
        if not segs:
            return None
        if segs[0] == "crate":
            return tuple(segs[1:])
        if segs[0] in ("super", "self"):
            base = list(module)
            k = 0
            while k < len(segs) and segs[k] in ("super", "self"):
                if segs[k] == "super":
                    if not base:
                        return None
                    base.pop()
                k += 1
            return tuple(base) + tuple(segs[k:])
        if segs[0] in self.children[module]:
            return tuple(module) + tuple(segs)
        return None

    def module_of(self, path, seen=None):
        """The module that defines what `path` names, following re-exports."""
        seen = seen or set()
        module = ()
        for k, seg in enumerate(path):
            if seg in self.children[module]:
                module = module + (seg,)
                continue
            target = self.reexports.get(module, {}).get(seg) if hasattr(self, "reexports") else None
            if target is not None and target not in seen:
                seen.add(target)
                return self.module_of(tuple(target) + tuple(path[k + 1 :]), seen)
            return module
        return module

    def references(self, module):
        """(path named, absolute module it lands in) for each path the file names, inline
        modules (`mod tests { use super::*; }`) resolved from where they are."""
        refs = []
        for text, scope in inline_modules(self.text[module], module):
            for m in USE.finditer(text):
                for segs in expand_use(m.group(1)):
                    absolute = self.absolute(scope, segs)
                    if absolute is not None:
                        refs.append(("::".join(segs), self.module_of(absolute)))
            if USES_ONLY:
                continue
            for m in PATH.finditer(USE.sub("", text)):
                segs = m.group(1).split("::")
                absolute = self.absolute(scope, segs)
                if absolute is not None:
                    refs.append((m.group(1), self.module_of(absolute)))
        return refs

    def graphs(self):
        """For each module with children: edges between its children, with the paths behind."""
        graphs = defaultdict(lambda: defaultdict(lambda: defaultdict(set)))
        for module in self.files:
            for named, target in self.references(module):
                k = 0
                while k < min(len(module), len(target)) and module[k] == target[k]:
                    k += 1
                if k == len(module) or k == len(target):
                    # A module and its ancestor or descendant: its shape, not a circle.
                    continue
                parent = module[:k]
                graphs[parent][module[k]][target[k]].add((self.rel(module), named))
        return graphs

    def rel(self, module):
        return os.path.relpath(self.files[module], os.path.dirname(self.src))


INLINE_MOD = re.compile(r"\bmod\s+(\w+)\s*\{")


def inline_modules(text, module):
    """The file's text outside its inline modules, with its module, then each inline
    module's text with the inline module's path (nested ones too)."""
    pieces, outside, pos = [], [], 0
    for m in INLINE_MOD.finditer(text):
        if m.start() < pos:
            continue
        depth, k = 1, m.end()
        while k < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            k += 1
        outside.append(text[pos : m.start()])
        pieces += inline_modules(text[m.end() : k - 1], module + (m.group(1),))
        pos = k
    outside.append(text[pos:])
    return [("".join(outside), module)] + pieces


def cycles(edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


USES_ONLY = False


def main(argv):
    global USES_ONLY
    listing = "--list" in argv
    USES_ONLY = "--uses-only" in argv
    dirs = [a for a in argv if not a.startswith("--")]
    if not dirs:
        print(__doc__)
        return 2
    found = 0
    for src in dirs:
        crate = Crate(src)
        for parent, edges in sorted(crate.graphs().items()):
            where = "crate" if not parent else "crate::" + "::".join(parent)
            if listing:
                for a in sorted(edges):
                    print(f"{src} {where}: {a} -> {', '.join(sorted(edges[a]))}")
            for comp in cycles(edges):
                found += 1
                members = set(comp)
                print(f"circle in {src} under {where}: {' <-> '.join(comp)}")
                for a in comp:
                    for b in sorted(edges[a]):
                        if b in members:
                            for file, named in sorted(edges[a][b])[:3]:
                                print(f"    {a} -> {b}: {file} names `{named}`")
    print(f"{found} import circle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
