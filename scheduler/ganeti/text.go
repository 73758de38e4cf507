package ganeti

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxTextInput caps the size of a text cluster description (64 MiB).
const maxTextInput = 64 << 20

// ReadText parses Ganeti's text backend format (the -t FILE input of hbal
// and hsqueeze). name is used in error messages.
//
// Sections are separated by empty lines: groups, nodes, instances, cluster
// tags and, optionally, instance policies; further sections are ignored.
//
//	group:    name|uuid|allocpolicy|tags[|networks]
//	node:     name|tMem|nMem|fMem|tDsk|fDsk|tCpu|flag|groupUUID[|spindles|tags|exclStor|freeSpindles|osCpus|cpuSpeed]
//	instance: name|mem|disk|vcpus|status|autoBalance|pnode|snode|template|tags[|spindleUse|spindles|forthcoming]
//	ipolicy:  owner|std|min;max[;min;max...]|templates|vcpuRatio|spindleRatio
//
// Node flag M is the master, Y offline, anything else online; a "?" in a
// numeric node field makes the node offline with zero resources. Missing
// node fields default to spindles 1, no tags, N, 0, 1 OS CPU, speed 1.0;
// missing instance fields to spindle use 1, unknown spindles, not
// forthcoming. An empty policy owner is the cluster; groups without a policy
// line, and the cluster without one, get DefaultIPolicy. Lists are
// comma-separated. Like Ganeti, the reader does not trim fields.
func ReadText(r io.Reader, name string) (*Cluster, error) {
	data, err := readInput(r, name)
	if err != nil {
		return nil, err
	}
	p := &textParser{file: name}
	return p.parse(string(data))
}

// readInput reads the whole input (ReadText's or ReadJSON's) up to
// maxTextInput bytes; a larger input is a syntax error.
func readInput(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxTextInput+1))
	if err != nil {
		return nil, &ParseError{File: name, Err: err}
	}
	if len(data) > maxTextInput {
		return nil, &ParseError{File: name, Err: fmt.Errorf("%w: input larger than %d bytes", ErrSyntax, maxTextInput)}
	}
	return data, nil
}

// yesNo reads a Y/N field.
func (p *textParser) yesNo(line int, field, s string) (bool, error) {
	switch s {
	case "Y":
		return true, nil
	case "N":
		return false, nil
	}
	return false, p.errf(line, field, ErrSyntax, "want Y or N, got %q", s)
}

type textLine struct {
	no   int
	text string
}

type textParser struct {
	file string
}

func (p *textParser) errf(line int, field string, sentinel error, format string, args ...any) error {
	return &ParseError{File: p.file, Line: line, Field: field, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
}

// sepSplit mirrors Ganeti's sepSplit: "a||b|" splits into a, "", b, "" and an
// empty string into nothing.
func sepSplit(s string, sep byte) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, string(sep))
}

func (p *textParser) parse(data string) (*Cluster, error) {
	// Haskell's lines: split on \n, a final \n does not open a new line.
	raw := strings.Split(data, "\n")
	if len(raw) > 0 && raw[len(raw)-1] == "" {
		raw = raw[:len(raw)-1]
	}
	var sections [][]textLine
	if len(raw) > 0 {
		cur := []textLine{}
		for i, l := range raw {
			if l == "" {
				sections = append(sections, cur)
				cur = []textLine{}
				continue
			}
			cur = append(cur, textLine{no: i + 1, text: l})
		}
		sections = append(sections, cur)
	}
	if len(sections) < 4 {
		return nil, p.errf(0, "", ErrSyntax, "%d sections instead of 4 or 5 (groups, nodes, instances, cluster tags, policies)", len(sections))
	}
	c := &Cluster{Policy: DefaultIPolicy()}
	groupByUUID := map[string]int{}
	for _, l := range sections[0] {
		g, err := p.group(l)
		if err != nil {
			return nil, err
		}
		groupByUUID[g.UUID] = len(c.Groups)
		c.Groups = append(c.Groups, g)
	}
	nodeByName := map[string]int{}
	for _, l := range sections[1] {
		n, err := p.node(l, groupByUUID)
		if err != nil {
			return nil, err
		}
		nodeByName[n.Name] = len(c.Nodes)
		c.Nodes = append(c.Nodes, n)
	}
	for _, l := range sections[2] {
		in, err := p.instance(l, nodeByName)
		if err != nil {
			return nil, err
		}
		c.Instances = append(c.Instances, in)
	}
	for _, l := range sections[3] {
		c.Tags = append(c.Tags, l.text)
	}
	if len(sections) > 4 {
		for _, l := range sections[4] {
			if err := p.policy(l, c); err != nil {
				return nil, err
			}
		}
	}
	if err := validate(c); err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.File = p.file
		}
		return nil, err
	}
	return c, nil
}

func (p *textParser) group(l textLine) (Group, error) {
	f := sepSplit(l.text, '|')
	if len(f) < 4 {
		return Group{}, p.errf(l.no, "group", ErrSyntax, "need 4 or 5 fields (name|uuid|allocpolicy|tags[|networks]), got %d", len(f))
	}
	switch f[2] {
	case "preferred", "last_resort", "unallocable":
	default:
		return Group{}, p.errf(l.no, "group "+f[0]+" allocpolicy", ErrSyntax, "invalid value %q", f[2])
	}
	g := Group{Name: f[0], UUID: f[1], AllocPolicy: f[2], Tags: sepSplit(f[3], ','), Policy: DefaultIPolicy()}
	if len(f) > 4 {
		g.Networks = sepSplit(f[4], ',')
	}
	return g, nil
}

func readInt(s string) (int, bool) {
	v, err := strconv.Atoi(strings.TrimLeft(s, " \t"))
	if err != nil {
		return 0, false
	}
	return v, true
}

func readFloat(s string) (float64, bool) {
	t := strings.TrimLeft(s, " \t")
	// Haskell's read accepts "1" and "1.5e3" but not ".5", "+1" or hex.
	if t == "" || t[0] == '.' || t[0] == '+' || strings.ContainsAny(t, "xXpP_") {
		return 0, false
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v != v || v > 1e300 || v < -1e300 {
		return 0, false
	}
	return v, true
}

func (p *textParser) node(l textLine, groups map[string]int) (Node, error) {
	f := sepSplit(l.text, '|')
	if len(f) < 9 {
		return Node{}, p.errf(l.no, "node", ErrSyntax, "need at least 9 fields (name|tMem|nMem|fMem|tDsk|fDsk|tCpu|flag|group), got %d", len(f))
	}
	defaults := []string{"1", "", "N", "0", "1", "1.0"}
	for len(f) < 15 {
		f = append(f, defaults[len(f)-9])
	}
	name := f[0]
	gdx, ok := groups[f[8]]
	if !ok {
		return Node{}, p.errf(l.no, "node "+name+" group", ErrReference, "unknown group %q", f[8])
	}
	for _, v := range f[1:7] {
		if v == "?" {
			// Ganeti: a node with unknown resources is offline and empty.
			return Node{Name: name, Offline: true, Group: gdx, CPUSpeed: 1}, nil
		}
	}
	n := Node{Name: name, Group: gdx, Tags: sepSplit(f[10], ','), Master: f[7] == "M", Offline: f[7] == "Y"}
	type fld struct {
		label string
		s     string
		dst   any
	}
	fields := []fld{
		{"total memory", f[1], &n.TotalMem}, {"node memory", f[2], &n.NodeMem}, {"free memory", f[3], &n.FreeMem},
		{"total disk", f[4], &n.TotalDisk}, {"free disk", f[5], &n.FreeDisk}, {"total cpus", f[6], &n.TotalCPU},
		{"spindles", f[9], &n.Spindles}, {"free spindles", f[12], &n.FreeSpindles}, {"os cpus", f[13], &n.OSCPUs},
		{"cpu speed", f[14], &n.CPUSpeed},
	}
	for _, x := range fields {
		switch d := x.dst.(type) {
		case *int:
			v, ok := readInt(x.s)
			if !ok {
				return Node{}, p.errf(l.no, "node "+name+" "+x.label, ErrSyntax, "not an integer: %q", x.s)
			}
			*d = v
		case *float64:
			v, ok := readFloat(x.s)
			if !ok {
				return Node{}, p.errf(l.no, "node "+name+" "+x.label, ErrSyntax, "not a number: %q", x.s)
			}
			*d = v
		}
	}
	var err error
	if n.ExclStorage, err = p.yesNo(l.no, "node "+name+" exclusive storage", f[11]); err != nil {
		return Node{}, err
	}
	return n, nil
}

func (p *textParser) instance(l textLine, nodes map[string]int) (Instance, error) {
	f := sepSplit(l.text, '|')
	if len(f) < 10 {
		return Instance{}, p.errf(l.no, "instance", ErrSyntax, "need at least 10 fields (name|mem|disk|vcpus|status|autobalance|pnode|snode|template|tags), got %d", len(f))
	}
	defaults := []string{"1", "-", "N"}
	for len(f) < 13 {
		f = append(f, defaults[len(f)-10])
	}
	name := f[0]
	in := Instance{Name: name, SNode: -1, Spindles: -1, Status: f[4], Template: DiskTemplate(f[8]), Tags: sepSplit(f[9], ',')}
	pdx, ok := nodes[f[6]]
	if !ok {
		return Instance{}, p.errf(l.no, "instance "+name+" primary node", ErrReference, "unknown node %q", f[6])
	}
	in.PNode = pdx
	if f[7] != "" {
		sdx, ok := nodes[f[7]]
		if !ok {
			return Instance{}, p.errf(l.no, "instance "+name+" secondary node", ErrReference, "unknown node %q", f[7])
		}
		in.SNode = sdx
	}
	ints := []struct {
		label string
		s     string
		dst   *int
	}{{"memory", f[1], &in.Mem}, {"disk", f[2], &in.Disk}, {"vcpus", f[3], &in.VCPUs}, {"spindle use", f[10], &in.SpindleUse}}
	for _, x := range ints {
		v, ok := readInt(x.s)
		if !ok {
			return Instance{}, p.errf(l.no, "instance "+name+" "+x.label, ErrSyntax, "not an integer: %q", x.s)
		}
		*x.dst = v
	}
	if !validStatus[f[4]] {
		return Instance{}, p.errf(l.no, "instance "+name+" status", ErrSyntax, "unknown status %q", f[4])
	}
	var err error
	if in.AutoBalance, err = p.yesNo(l.no, "instance "+name+" auto balance", f[5]); err != nil {
		return Instance{}, err
	}
	if !validTemplate(in.Template) {
		return Instance{}, p.errf(l.no, "instance "+name+" disk template", ErrSyntax, "unknown template %q", f[8])
	}
	if f[11] != "-" {
		v, ok := readInt(f[11])
		if !ok {
			return Instance{}, p.errf(l.no, "instance "+name+" spindles", ErrSyntax, "not an integer or -: %q", f[11])
		}
		in.Spindles = v
	}
	if in.Forthcoming, err = p.yesNo(l.no, "instance "+name+" forthcoming", f[12]); err != nil {
		return Instance{}, err
	}
	if in.Template == DRBD && in.SNode == in.PNode {
		return Instance{}, p.errf(l.no, "instance "+name+" secondary node", ErrInvalid, "same as the primary node %q", f[6])
	}
	return in, nil
}

func (p *textParser) ispec(line int, field, s string) (ISpec, error) {
	f := sepSplit(s, ',')
	if len(f) < 6 {
		return ISpec{}, p.errf(line, field, ErrSyntax, "need 6 comma-separated values (mem,cpu,disk,diskcount,nics,spindleuse), got %q", s)
	}
	var v [6]int
	for i := range v {
		x, ok := readInt(f[i])
		if !ok {
			return ISpec{}, p.errf(line, field, ErrSyntax, "not an integer: %q", f[i])
		}
		v[i] = x
	}
	return ISpec{MemorySize: v[0], CPUCount: v[1], DiskSize: v[2], DiskCount: v[3], NICCount: v[4], SpindleUse: v[5]}, nil
}

func (p *textParser) policy(l textLine, c *Cluster) error {
	f := sepSplit(l.text, '|')
	if len(f) < 6 {
		return p.errf(l.no, "ipolicy", ErrSyntax, "need 6 fields (owner|std|min;max|templates|vcpuratio|spindleratio), got %d", len(f))
	}
	owner := f[0]
	label := "ipolicy " + owner
	if owner == "" {
		label = "cluster ipolicy"
	}
	var pol IPolicy
	var err error
	if pol.Std, err = p.ispec(l.no, label+" std spec", f[1]); err != nil {
		return err
	}
	mm := sepSplit(f[2], ';')
	if len(mm)%2 != 0 {
		return p.errf(l.no, label+" min/max specs", ErrSyntax, "odd number of specs")
	}
	for i := 0; i < len(mm); i += 2 {
		lo, err := p.ispec(l.no, label+" min spec", mm[i])
		if err != nil {
			return err
		}
		hi, err := p.ispec(l.no, label+" max spec", mm[i+1])
		if err != nil {
			return err
		}
		pol.MinMax = append(pol.MinMax, MinMaxSpec{Min: lo, Max: hi})
	}
	for _, t := range sepSplit(f[3], ',') {
		if !validTemplate(DiskTemplate(t)) {
			return p.errf(l.no, label+" disk templates", ErrSyntax, "unknown template %q", t)
		}
		pol.DiskTemplates = append(pol.DiskTemplates, DiskTemplate(t))
	}
	var ok bool
	if pol.VCPURatio, ok = readFloat(f[4]); !ok {
		return p.errf(l.no, label+" vcpu ratio", ErrSyntax, "not a number: %q", f[4])
	}
	if pol.SpindleRatio, ok = readFloat(f[5]); !ok {
		return p.errf(l.no, label+" spindle ratio", ErrSyntax, "not a number: %q", f[5])
	}
	if owner == "" {
		c.Policy = pol
		return nil
	}
	for i := range c.Groups {
		if c.Groups[i].Name == owner {
			c.Groups[i].Policy = pol
			return nil
		}
	}
	return p.errf(l.no, "ipolicy owner", ErrReference, "unknown group %q", owner)
}

// WriteText writes c in the text backend format ReadText reads (and hbal and
// hsqueeze accept).
func WriteText(w io.Writer, c *Cluster) error {
	bw := bufio.NewWriter(w)
	for _, g := range c.Groups {
		fmt.Fprintf(bw, "%s|%s|%s|%s|%s\n", g.Name, g.UUID, g.AllocPolicy, strings.Join(g.Tags, ","), strings.Join(g.Networks, ","))
	}
	bw.WriteString("\n")
	for _, n := range c.Nodes {
		flag := "N"
		switch {
		case n.Master:
			flag = "M"
		case n.Offline:
			flag = "Y"
		}
		excl := "N"
		if n.ExclStorage {
			excl = "Y"
		}
		gu := ""
		if n.Group >= 0 && n.Group < len(c.Groups) {
			gu = c.Groups[n.Group].UUID
		}
		fmt.Fprintf(bw, "%s|%s|%d|%d|%s|%d|%s|%s|%s|%d|%s|%s|%d|%d|%s\n", n.Name,
			fmtFloat(n.TotalMem), n.NodeMem, n.FreeMem, fmtFloat(n.TotalDisk), n.FreeDisk, fmtFloat(n.TotalCPU),
			flag, gu, n.Spindles, strings.Join(n.Tags, ","), excl, n.FreeSpindles, n.OSCPUs, fmtFloat(n.CPUSpeed))
	}
	bw.WriteString("\n")
	nodeName := func(i int) string {
		if i < 0 || i >= len(c.Nodes) {
			return ""
		}
		return c.Nodes[i].Name
	}
	for _, in := range c.Instances {
		ab := "N"
		if in.AutoBalance {
			ab = "Y"
		}
		sp := "-"
		if in.Spindles >= 0 {
			sp = strconv.Itoa(in.Spindles)
		}
		fc := "N"
		if in.Forthcoming {
			fc = "Y"
		}
		fmt.Fprintf(bw, "%s|%d|%d|%d|%s|%s|%s|%s|%s|%s|%d|%s|%s\n", in.Name, in.Mem, in.Disk, in.VCPUs, in.Status, ab,
			nodeName(in.PNode), nodeName(in.SNode), in.Template, strings.Join(in.Tags, ","), in.SpindleUse, sp, fc)
	}
	bw.WriteString("\n")
	for _, t := range c.Tags {
		fmt.Fprintf(bw, "%s\n", t)
	}
	bw.WriteString("\n")
	writePolicy(bw, "", c.Policy)
	for _, g := range c.Groups {
		writePolicy(bw, g.Name, g.Policy)
	}
	return bw.Flush()
}

func fmtFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

func fmtSpec(s ISpec) string {
	return fmt.Sprintf("%d,%d,%d,%d,%d,%d", s.MemorySize, s.CPUCount, s.DiskSize, s.DiskCount, s.NICCount, s.SpindleUse)
}

func writePolicy(w *bufio.Writer, owner string, p IPolicy) {
	var mm []string
	for _, m := range p.MinMax {
		mm = append(mm, fmtSpec(m.Min), fmtSpec(m.Max))
	}
	var ts []string
	for _, t := range p.DiskTemplates {
		ts = append(ts, string(t))
	}
	fmt.Fprintf(w, "%s|%s|%s|%s|%s|%s\n", owner, fmtSpec(p.Std), strings.Join(mm, ";"), strings.Join(ts, ","), fmtFloat(p.VCPURatio), fmtFloat(p.SpindleRatio))
}
