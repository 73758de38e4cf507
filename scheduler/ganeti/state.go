package ganeti

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// dynUtil is a dynamic utilisation vector (cpu, memory, disk, network).
type dynUtil struct{ cpu, mem, dsk, net float64 }

var baseUtil = dynUtil{1, 1, 1, 1}

func (a dynUtil) add(b dynUtil) dynUtil {
	return dynUtil{a.cpu + b.cpu, a.mem + b.mem, a.dsk + b.dsk, a.net + b.net}
}
func (a dynUtil) sub(b dynUtil) dynUtil {
	return dynUtil{a.cpu - b.cpu, a.mem - b.mem, a.dsk - b.dsk, a.net - b.net}
}

// peer is the memory of DRBD instances whose primary is node pdx and whose
// secondary is the node holding the peer list.
type peer struct {
	pdx int
	mem int
}

// nodeState is hbal's per-node book-keeping (Ganeti's Node.Node). It is a
// value: slices and maps inside are shared between copies and never
// modified in place (copy on write).
type nodeState struct {
	tMem           float64
	nMem           int
	tDsk           float64
	tCPU, cpuSpeed float64
	nCPU           int
	tSpindles      int
	// cur counts the committed instances, fth the forthcoming ones too.
	cur, fth          usage
	nPri, nSec        int
	peers             []peer // sorted by pdx
	failN1            bool
	rMem              int
	pRem              float64
	loDsk             int
	hiCPU             int
	hiSpindles        float64
	offline, master   bool
	utilPool          dynUtil
	pTags             map[string]int
	group             int
	vcpuRatio         float64
	exclStorage       bool
	migTags, rmigTags []string // sorted sets
	locTags           []string // sorted set
	locScore          int
	instMap           map[[2]string]int
	xMem              int
}

// instState is hbal's per-instance book-keeping (Ganeti's Instance.Instance).
type instState struct {
	mem, dsk, vcpus int
	status          string
	pNode, sNode    int
	util            dynUtil
	movable         bool
	autoBalance     bool
	tmpl            DiskTemplate
	spindleUse      int
	spindles        int // -1: unknown
	exclTags        []string
	dsrdTags        []string // sorted set
	locScore        int
	forthcoming     bool
}

func (i *instState) notOffline() bool { return i.status != "ADMIN_offline" }
func (i *instState) isRunning() bool  { return i.status == "running" || i.status == "ERROR_up" }
func (i *instState) usesMemory() bool { return !i.forthcoming && i.isRunning() }

// usedMem is the memory the instance takes on its primary node: 0 unless
// it uses memory.
func (i *instState) usedMem() int {
	if i.usesMemory() {
		return i.mem
	}
	return 0
}
func (i *instState) usesSecMem() bool { return i.notOffline() && i.autoBalance }
func (i *instState) usesLocal() bool  { return i.tmpl.usesLocalStorage() }

// localDisk is the disk the instance takes on its nodes: 0 unless its
// template uses local storage.
func (i *instState) localDisk() int {
	if i.usesLocal() {
		return i.dsk
	}
	return 0
}
func (i *instState) hasSecondary() bool { return i.tmpl == DRBD }

// State is a cluster loaded for planning: the model plus hbal's derived
// per-node and per-instance values. It is not safe for concurrent use.
type State struct {
	c     *Cluster
	nodes []nodeState
	insts []instState
	alias []string // node aliases (common domain suffix removed)
	// nodeIdx and instIdx map to Cluster indices when the state covers a
	// single group (nil: identity).
	nodeIdx, instIdx []int
}

// Load validates c and computes hbal's derived state the way Ganeti's loader
// does (exclusion and location tags, N+1 peers, policies, split-group
// instances made immovable, unaccounted memory).
func Load(c *Cluster) (*State, error) {
	if err := validate(c); err != nil {
		return nil, err
	}
	s := &State{c: c}
	exTags := prefixedValues(c.Tags, TagExclusionPrefix)
	dsrdPrefixes := prefixedValues(c.Tags, TagDesiredLocationPrefix)
	s.nodes = make([]nodeState, len(c.Nodes))
	for i := range c.Nodes {
		s.nodes[i] = newNodeState(&c.Nodes[i])
		s.nodes[i].locTags = tagSet(c.Tags, TagLocationPrefix, c.Nodes[i].Tags)
	}
	s.insts = make([]instState, len(c.Instances))
	for i := range c.Instances {
		in := &c.Instances[i]
		st := instState{mem: in.Mem, dsk: in.Disk, vcpus: in.VCPUs, status: in.Status, pNode: in.PNode, sNode: in.SNode,
			util: baseUtil, movable: in.Template.movable(), autoBalance: in.AutoBalance, tmpl: in.Template,
			spindleUse: in.SpindleUse, spindles: in.Spindles, forthcoming: in.Forthcoming}
		for _, t := range in.Tags {
			for _, p := range exTags {
				if strings.HasPrefix(t, p) {
					st.exclTags = append(st.exclTags, t)
					break
				}
			}
		}
		st.dsrdTags = tagSet(dsrdPrefixes, "", in.Tags)
		if in.SNode >= 0 {
			st.locScore = intersectCount(s.nodes[in.PNode].locTags, s.nodes[in.SNode].locTags)
		}
		s.insts[i] = st
	}
	for i := range s.insts {
		in := &s.insts[i]
		s.nodes[in.pNode].setPri(in)
		if in.sNode >= 0 {
			s.nodes[in.sNode].setSec(in)
		}
	}
	for ni := range s.nodes {
		n := &s.nodes[ni]
		n.buildPeers(s, ni)
		pol := &c.Groups[c.Nodes[ni].Group].Policy
		n.vcpuRatio = pol.VCPURatio
		n.hiCPU = floorInt(pol.VCPURatio * n.tCPU)
		n.hiSpindles = pol.SpindleRatio * float64(n.tSpindles)
		n.migTags = tagSet(c.Tags, TagMigrationPrefix, c.Nodes[ni].Tags)
		n.rmigTags = recvMigTags(c.Tags, n.migTags)
	}
	for i := range s.insts {
		in := &s.insts[i]
		if in.sNode >= 0 && c.Nodes[in.pNode].Group != c.Nodes[in.sNode].Group {
			in.movable = false
		}
	}
	// checkData: memory the node reports as used that no instance explains.
	imem := make([]int, len(s.nodes))
	for i := range s.insts {
		if s.insts[i].usesMemory() {
			imem[s.insts[i].pNode] += s.insts[i].mem
		}
	}
	for ni := range s.nodes {
		n := &s.nodes[ni]
		n.xMem = truncInt(n.tMem) - n.nMem - n.cur.fMem - imem[ni]
		if n.xMem < 0 {
			// Ganeti 3 counts free memory as total minus node minus
			// instance memory minus the unexplained part; memory the node
			// reports free beyond what its instances explain is not used
			// (the forthcoming-aware figures keep the reported value).
			n.cur.fMem += n.xMem
		}
	}
	s.alias = aliases(c)
	return s, nil
}

func floorInt(f float64) int {
	if f != f || f > 1e18 || f < -1e18 {
		return 0
	}
	return int(mathFloor(f))
}

func truncInt(f float64) int {
	if f != f || f > 1e18 || f < -1e18 {
		return 0
	}
	return int(f)
}

func validate(c *Cluster) error {
	const file = "cluster"
	if len(c.Groups) == 0 && len(c.Nodes) > 0 {
		return &ParseError{File: file, Field: "groups", Err: fmt.Errorf("%w: nodes but no groups", ErrInvalid)}
	}
	for i, n := range c.Nodes {
		if n.Group < 0 || n.Group >= len(c.Groups) {
			return &ParseError{File: file, Field: fmt.Sprintf("node %s group", n.Name), Err: fmt.Errorf("%w: group index %d out of range", ErrReference, n.Group)}
		}
		if !n.Offline && (n.TotalMem <= 0 || n.TotalCPU <= 0) {
			return &ParseError{File: file, Field: fmt.Sprintf("node %s", n.Name), Err: fmt.Errorf("%w: online node %d needs positive total memory and cpus", ErrInvalid, i)}
		}
	}
	for _, in := range c.Instances {
		if in.PNode < 0 || in.PNode >= len(c.Nodes) {
			return &ParseError{File: file, Field: fmt.Sprintf("instance %s primary node", in.Name), Err: fmt.Errorf("%w: node index %d out of range", ErrReference, in.PNode)}
		}
		if in.SNode < -1 || in.SNode >= len(c.Nodes) {
			return &ParseError{File: file, Field: fmt.Sprintf("instance %s secondary node", in.Name), Err: fmt.Errorf("%w: node index %d out of range", ErrReference, in.SNode)}
		}
		if in.Template == DRBD && in.SNode == in.PNode {
			return &ParseError{File: file, Field: fmt.Sprintf("instance %s secondary node", in.Name), Err: fmt.Errorf("%w: same as the primary node", ErrInvalid)}
		}
		if !validTemplate(in.Template) {
			return &ParseError{File: file, Field: fmt.Sprintf("instance %s disk template", in.Name), Err: fmt.Errorf("%w: unknown template %q", ErrSyntax, in.Template)}
		}
		if !validStatus[in.Status] {
			return &ParseError{File: file, Field: fmt.Sprintf("instance %s status", in.Name), Err: fmt.Errorf("%w: unknown status %q", ErrSyntax, in.Status)}
		}
	}
	return nil
}

// prefixedValues returns what follows prefix in the tags that start with it
// (empty values dropped).
func prefixedValues(tags []string, prefix string) []string {
	var out []string
	for _, t := range tags {
		if v, ok := strings.CutPrefix(t, prefix); ok && v != "" {
			out = append(out, v)
		}
	}
	return out
}

// tagSet is Ganeti's getTags: for every cluster tag prefix+P, the node tags
// starting with "P:". With prefix "" the cluster tags are the P values.
func tagSet(ctags []string, prefix string, ntags []string) []string {
	var out []string
	for _, ct := range ctags {
		p, ok := strings.CutPrefix(ct, prefix)
		if !ok {
			continue
		}
		for _, nt := range ntags {
			if strings.HasPrefix(nt, p+":") {
				out = append(out, nt)
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// recvMigTags is Ganeti's getRecvMigRestrictions: a node's migration tags
// plus every source tag allowed to migrate to one of them.
func recvMigTags(ctags []string, mig []string) []string {
	out := append([]string(nil), mig...)
	for _, ct := range ctags {
		v, ok := strings.CutPrefix(ct, TagAllowMigrationPrefix)
		if !ok {
			continue
		}
		i := strings.Index(v, "::")
		if i < 0 {
			continue
		}
		src, dst := v[:i], v[i+2:]
		if strings.Contains(dst, "::") {
			continue
		}
		if slices.Contains(mig, dst) {
			out = append(out, src)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func isSubset(a, b []string) bool {
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			return false
		}
	}
	return true
}

func intersectCount(a, b []string) int {
	n := 0
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); ok {
			n++
		}
	}
	return n
}

// aliases strips the longest common ".domain" suffix of all node and
// instance names from the node names (Ganeti's computeAlias).
func aliases(c *Cluster) []string {
	var names []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
	}
	for _, in := range c.Instances {
		names = append(names, in.Name)
	}
	suffix := ""
	if len(names) > 0 {
		x := names[0]
		for i := len(x) - 1; i >= 0; i-- {
			if x[i] != '.' {
				continue
			}
			cand := x[i:]
			all := true
			for _, y := range names[1:] {
				if !strings.HasSuffix(y, cand) {
					all = false
					break
				}
			}
			if all {
				suffix = cand // keep going: longer suffixes come first from the left
			}
		}
	}
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = strings.TrimSuffix(n.Name, suffix)
	}
	return out
}

// Score returns the cluster score, computed from scratch exactly as hbal
// computes it.
func (s *State) Score() float64 {
	return exactScore(len(s.nodes), func(i int) *metricVec { v := s.nodes[i].vector(); return &v },
		func(i int) *nodeState { return &s.nodes[i] }, &metricWeights)
}

// Metrics returns the unweighted value of every score component, by name.
func (s *State) Metrics() map[string]float64 {
	d := detailedScore(s.nodes)
	out := make(map[string]float64, nMetrics)
	for k, v := range d {
		out[metricNames[k]] = v
	}
	return out
}
