package preview

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// finish renders what the JSON analysis found: a table for an array or
// NDJSON; for an object its scalars, its keys, and the array that holds
// its bytes, wherever it is.
func (a *jsonAn) finish(pv *Preview) []section {
	a.finishLex()
	f := &pv.Facts
	f.Malformed = a.err
	size := humanSize(f.Size)
	var secs []section
	if a.err != "" {
		secs = append(secs, section{prioHead, fmt.Sprintf("Malformed JSON at %s; the figures cover what came before.\n", a.err)})
	}
	switch {
	case a.tops > 1:
		pv.Kind, f.Format = KindNDJSON, "ndjson"
		head := fmt.Sprintf("NDJSON, %d records of %s (%s).\n", a.nd.rows, noun(a.nd), size)
		return append(secs, tableSections(head, a.nd, f, nil)...)
	case a.topKind == '[':
		t := a.table("")
		if t == nil {
			return append(secs, section{prioHead, fmt.Sprintf("JSON array (%s).\n", size)})
		}
		head := fmt.Sprintf("JSON array of %d %s (%s).\n", t.rows, noun(t), size)
		secs = append(secs, tableSections(head, t, f, nil)...)
		if ts, ok := a.treeSection(f); ok {
			secs = append(secs, ts)
		}
		return secs
	case a.topKind == '{' && len(a.nodes) > 0:
		return append(secs, a.objectSections(f)...)
	case a.topText != "":
		return append(secs, section{prioHead, fmt.Sprintf("JSON value: %s\n", a.topText)})
	}
	return append(secs, section{prioHead, fmt.Sprintf("JSON (%s).\n", size)})
}

func (a *jsonAn) table(path string) *table {
	for _, t := range a.tabs {
		// A map is known to be one once closed; an array left open by
		// a cut input still has its rows.
		if t.path == path && (t.done || !t.isMap) {
			return t.t
		}
	}
	return nil
}

// noun names what a table's rows are.
func noun(t *table) string {
	for i, n := range t.kinds {
		if n == t.rows && t.rows > 0 {
			switch i {
			case tObject:
				return "objects"
			case tArray:
				return "arrays"
			case tString, tDate, tDateTime:
				return "strings"
			case tInt, tFloat:
				return "numbers"
			}
		}
	}
	if t.kinds[tInt]+t.kinds[tFloat] == t.rows && t.rows > 0 {
		return "numbers"
	}
	return "items"
}

// maxKeysLine is about the most bytes of the root's keys listed.
const maxKeysLine = 800

// smallObject is the size under which an object of scalars is shown
// member by member, as values.
const smallObject = 300

// describe renders a recorded member: a scalar as its value, a small
// object of scalars as its values, a container as its type and size.
// Scalars shown are added to f.
func (a *jsonAn) describe(i int, f *Facts) string {
	n := a.nodes[i]
	switch n.kind {
	case 's':
		f.Scalars = append(f.Scalars, Scalar{n.path, n.value})
		return fmt.Sprintf("%s=%s", n.path, clip(n.value, 160))
	case '{':
		if kids := a.children(i); n.size <= smallObject && int64(len(kids)) == n.n && n.n > 0 && a.allScalars(kids) {
			parts := make([]string, len(kids))
			for j, k := range kids {
				parts[j] = a.describe(k, f)
			}
			return strings.Join(parts, "; ")
		}
		if n.value != "" && n.size <= smallObject {
			return fmt.Sprintf("%s=%s", n.path, n.value)
		}
		return fmt.Sprintf("%s: object of %s (%s)", n.path, plural(n.n, "key"), humanSize(n.size))
	}
	if n.value != "" && n.size <= smallObject {
		return fmt.Sprintf("%s=%s", n.path, n.value)
	}
	if t := a.table(n.path); t != nil && t.rows == n.n {
		return fmt.Sprintf("%s: array of %d %s (%s)", n.path, n.n, noun(t), humanSize(n.size))
	}
	return fmt.Sprintf("%s: array of %d (%s)", n.path, n.n, humanSize(n.size))
}

func (a *jsonAn) allScalars(idx []int) bool {
	for _, i := range idx {
		if a.nodes[i].kind != 's' {
			return false
		}
	}
	return true
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	if len(what) > 1 && what[len(what)-1] == 'y' && !strings.ContainsRune("aeiou", rune(what[len(what)-2])) {
		return fmt.Sprintf("%d %sies", n, what[:len(what)-1])
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func (a *jsonAn) children(parent int) []int {
	var out []int
	for i, n := range a.nodes {
		if n.parent == parent && i != parent {
			out = append(out, i)
		}
	}
	return out
}

// bulk follows the largest container from the root down, as long as it
// holds a good part of its parent's bytes (always at the root), and
// stops at an array of several elements. It returns the node indexes on the way.
func (a *jsonAn) bulk() []int {
	path := []int{0}
	cur := 0
	if a.table("") != nil {
		return path // the root is a map of objects
	}
	for {
		best := -1
		for _, i := range a.children(cur) {
			// Among equals, one with statistics (its table may have
			// been given to a later array).
			if n := a.nodes[i]; n.kind != 's' && (best < 0 || n.size > a.nodes[best].size ||
				n.size == a.nodes[best].size && a.table(n.path) != nil && a.table(a.nodes[best].path) == nil) {
				best = i
			}
		}
		// From the root, the largest member is worth showing whatever its
		// share; below, only one holding a good part of its parent.
		if best < 0 || a.nodes[best].size*4 < a.nodes[cur].size && cur != 0 || a.nodes[best].size == 0 {
			return path
		}
		path = append(path, best)
		cur = best
		if n := a.nodes[best]; n.kind == '[' && n.n != 1 || n.kind == '{' && a.table(n.path) != nil {
			return path // an array, or a map of objects
		}
	}
}

func (a *jsonAn) objectSections(f *Facts) []section {
	root := a.nodes[0]
	head := fmt.Sprintf("JSON object of %s (%s).\n", plural(root.n, "key"), humanSize(f.Size))
	secs := []section{{prioHead, head}, a.keysSection(root, f)}
	path := a.bulk()
	if t := a.table(""); len(path) == 1 && t != nil {
		f.Path = ""
		t.rowWord = "entries"
		secs = append(secs, tableSections(fmt.Sprintf("Its values are %s, described as rows.\n", noun(t)), t, f, nil)...)
	}
	if len(path) > 1 {
		secs = append(secs, a.bulkSections(path, f)...)
	}
	secs = append(secs, a.otherTables(f)...)
	if ts, ok := a.treeSection(f); ok {
		secs = append(secs[:1], append([]section{ts}, secs[1:]...)...)
	}
	return secs
}

// keysSection describes the root object's members, up to a line's worth:
// the members of a map at the root are better told by its rows.
func (a *jsonAn) keysSection(root jnode, f *Facts) section {
	var top []string
	n := 0
	for _, i := range a.children(0) {
		if n > maxKeysLine {
			break
		}
		d := a.describe(i, f)
		top = append(top, d)
		n += len(d)
	}
	if more := root.n - int64(len(top)); more > 0 {
		top = append(top, fmt.Sprintf("and %d more keys", more))
	}
	return section{prioFacts, "Keys: " + strings.Join(top, "; ") + "\n"}
}

// bulkSections describes the node that holds most of the bytes, at the
// end of path (a way down from the root), with what sits beside it on
// the way down (counts the server reports, the query, the column names),
// and its rows if it is an array of them or a map of objects. It sets
// f.Path to the bulk's path.
func (a *jsonAn) bulkSections(path []int, f *Facts) []section {
	b := a.nodes[path[len(path)-1]]
	var beside []string
	for k := 1; k < len(path)-1; k++ {
		for _, i := range a.children(path[k]) {
			if i != path[k+1] {
				beside = append(beside, a.describe(i, f))
			}
		}
	}
	f.Path = b.path
	line := fmt.Sprintf("Most of the bytes are in %s", a.describe(path[len(path)-1], f))
	if len(path) == 2 {
		line = "Most of the bytes are in " + b.path // the keys line described it
	}
	if len(beside) > 0 {
		line += "; beside it: " + strings.Join(beside, "; ")
	}
	line += ".\n"
	// A tree's bulk is its first level: the tree line says more.
	isTree := a.tree.Nodes > 1 && strings.HasSuffix(b.path, "children")
	t := a.table(b.path)
	switch {
	case t != nil && b.kind == '{':
		t.rowWord = "entries"
		line = strings.TrimSuffix(line, ".\n") + fmt.Sprintf(", a map whose values are %s, described as rows.\n", noun(t))
		return tableSections(line, t, f, nil)
	case t != nil && b.kind == '[' && !isTree:
		return tableSections(line, t, f, a.columnNames(path[len(path)-2], t))
	}
	return []section{{prioFacts, line}}
}

// otherTables describes the other arrays of objects, largest first: a
// line each, then their fields if the budget allows.
func (a *jsonAn) otherTables(f *Facts) []section {
	var secs []section
	others := slices.Clone(a.tabs)
	slices.SortStableFunc(others, func(x, y *jtab) int { return cmp.Compare(y.size, x.size) })
	for _, t := range others {
		if t.path == f.Path || t.t.rows < 2 || t.size <= smallObject || noun(t.t) != "objects" || strings.HasPrefix(t.path, f.Path+"[") && f.Path != "" {
			continue
		}
		secs = append(secs,
			section{prioDetail, fmt.Sprintf("Also %s: array of %d objects (%s).\n", t.path, t.t.rows, humanSize(t.size))},
			section{prioSample - 5, fieldsText(t.t.columns(), t.t)})
	}
	return secs
}

// treeSection describes nested `children` arrays, if there are any.
func (a *jsonAn) treeSection(f *Facts) (section, bool) {
	if a.tree.Nodes <= 1 {
		return section{}, false
	}
	tr := &Tree{Nodes: a.tree.Nodes, Leaves: a.tree.Leaves, Depth: a.maxDepth}
	// One root: its children are the top level; several: they are.
	n, level := a.nodesAt[1], 1
	if a.nodesAt[0] > 1 {
		n, level = a.nodesAt[0], 0
	}
	tr.TopNames, tr.TopSizes = a.names[level], a.subtree[level]
	f.Tree = tr
	s := fmt.Sprintf("Tree of `children`: %d nodes, %d leaves, depth %d.", tr.Nodes, tr.Leaves, tr.Depth)
	if len(tr.TopNames) > 0 {
		named := make([]string, len(tr.TopNames))
		for i, name := range tr.TopNames {
			named[i] = name
			if tr.TopSizes[i] > 1 {
				named[i] += fmt.Sprintf(" (%d nodes)", tr.TopSizes[i])
			}
		}
		s += " Top-level names: " + strings.Join(named, ", ")
		if n > int64(len(tr.TopNames)) {
			s += fmt.Sprintf(" (%d of %d)", len(tr.TopNames), n)
		}
		s += "."
	}
	return section{prioFacts + 1, s + "\n"}, true
}

// columnNames finds the names of rows given as arrays in a sibling of
// the array ("columns", "fields", "headers", "meta" as in ClickHouse's
// JSONCompact...), a list of names or of objects with a name.
func (a *jsonAn) columnNames(parent int, t *table) []string {
	if len(t.fields) == 0 || t.fields[0].name != posNames[0] {
		return nil
	}
	for _, i := range a.children(parent) {
		n := a.nodes[i]
		key := n.path[strings.LastIndexByte(n.path, '.')+1:]
		switch key {
		case "columns", "fields", "headers", "header", "cols", "names", "meta", "schema":
		default:
			continue
		}
		var names []string
		if json.Unmarshal([]byte(n.value), &names) != nil {
			var objs []struct{ Name string }
			if json.Unmarshal([]byte(n.value), &objs) != nil {
				continue
			}
			names = names[:0]
			for _, o := range objs {
				names = append(names, o.Name)
			}
		}
		if len(names) == len(t.fields) {
			return names
		}
	}
	return nil
}
