package ganeti

import (
	"fmt"
	"math/rand/v2"
)

// genSpec sizes a generated cluster.
type genSpec struct {
	Nodes     int     // online nodes (the first is the master)
	Standby   int     // offline nodes tagged htools:standby:
	Offline   int     // offline nodes without a standby tag
	Instances int     // instances to place
	DRBD      float64 // share of DRBD instances
	Plain     float64 // share of plain (immovable, local storage) instances
	Load      float64 // target share of memory used (0..1)
}

// genCluster builds a seeded random cluster: varied node sizes and loads,
// standby nodes, DRBD pairs, externally mirrored instances, the odd plain,
// down or non-auto-balanced instance. Resources are consistent (free memory
// and disk match the instances), as Ganeti would report them.
func genCluster(seed uint64, sp genSpec) *Cluster {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	pick := func(xs ...int) int { return xs[r.IntN(len(xs))] }
	c := &Cluster{Policy: DefaultIPolicy()}
	c.Policy.Std.MemorySize = pick(128, 256, 512, 1024)
	c.Policy.Std.CPUCount = pick(1, 1, 2)
	g := Group{Name: "group-01", UUID: "uuid-01", AllocPolicy: "preferred", Policy: DefaultIPolicy()}
	g.Policy.VCPURatio = []float64{2, 4, 4, 8}[r.IntN(4)]
	c.Groups = []Group{g}
	total := sp.Nodes + sp.Standby + sp.Offline
	memSizes := []int{4096, 8192, 16384, 32768}
	for i := 0; i < total; i++ {
		tm := memSizes[r.IntN(len(memSizes))]
		if sp.Nodes > 20 {
			tm = memSizes[2+r.IntN(2)]
		}
		n := Node{
			Name: fmt.Sprintf("node-%03d", i), TotalMem: float64(tm), NodeMem: pick(0, 256, 512, 1024),
			TotalDisk: float64(pick(204800, 409600, 819200)), TotalCPU: float64(pick(4, 8, 16, 32)),
			Spindles: 1, OSCPUs: pick(0, 1, 1, 2), CPUSpeed: 1,
		}
		n.FreeMem = tm - n.NodeMem
		n.FreeDisk = int(n.TotalDisk)
		switch {
		case i == 0:
			n.Master = true
		case i >= sp.Nodes && i < sp.Nodes+sp.Standby:
			n.Offline = true
			n.Tags = []string{TagStandbyPrefix + pick1(r, "auto", "manual", "x")}
		case i >= sp.Nodes+sp.Standby:
			n.Offline = true
		}
		c.Nodes = append(c.Nodes, n)
	}
	// Node-local used vCPUs, to keep within the vCPU ratio.
	ucpu := make([]int, total)
	for i := range ucpu {
		ucpu[i] = c.Nodes[i].OSCPUs
	}
	budget := make([]int, sp.Nodes)
	for i := 0; i < sp.Nodes; i++ {
		budget[i] = int(float64(c.Nodes[i].FreeMem) * sp.Load * (0.4 + 1.2*r.Float64()))
	}
	fits := func(i, mem, dsk, vc int) bool {
		n := &c.Nodes[i]
		return n.FreeMem-mem > 256 && n.FreeDisk-dsk > 1024 &&
			float64(ucpu[i]+vc)/n.TotalCPU <= g.Policy.VCPURatio && budget[i] >= mem
	}
	for k := 0; k < sp.Instances; k++ {
		in := Instance{Name: fmt.Sprintf("inst-%03d", k), Mem: pick(128, 256, 512, 512, 1024, 2048),
			VCPUs: pick(1, 1, 2, 4), Status: "running", AutoBalance: true, SNode: -1, SpindleUse: 1, Spindles: -1, Template: Ext}
		switch x := r.Float64(); {
		case x < sp.DRBD:
			in.Template = DRBD
			in.Disk = pick(10240, 20480, 51200)
		case x < sp.DRBD+sp.Plain:
			in.Template = Plain
			in.Disk = pick(10240, 20480)
		}
		if r.IntN(25) == 0 {
			in.Status = "ADMIN_down"
		}
		if r.IntN(30) == 0 {
			in.AutoBalance = false
		}
		placed := false
		for try := 0; try < 20 && !placed; try++ {
			p := r.IntN(sp.Nodes)
			if !fits(p, in.Mem, in.Disk, in.VCPUs) {
				continue
			}
			if in.Template == DRBD {
				s := r.IntN(sp.Nodes)
				if s == p || c.Nodes[s].FreeDisk-in.Disk <= 1024 {
					continue
				}
				in.SNode = s
				c.Nodes[s].FreeDisk -= in.Disk
			}
			in.PNode = p
			if in.Status == "running" || in.Status == "ADMIN_down" {
				c.Nodes[p].FreeMem -= in.Mem
			}
			if in.Template.usesLocalStorage() {
				c.Nodes[p].FreeDisk -= in.Disk
			}
			ucpu[p] += in.VCPUs
			budget[p] -= in.Mem
			placed = true
		}
		if placed {
			c.Instances = append(c.Instances, in)
		}
	}
	return c
}

func pick1(r *rand.Rand, xs ...string) string { return xs[r.IntN(len(xs))] }

// genSqueezeCase returns the i-th cluster of the differential suite with its
// hsqueeze options (minimal, target).
func genSqueezeCase(i int) (*Cluster, float64, float64) {
	if i >= 60 {
		return genLargerSqueezeCase(i - 60)
	}
	r := rand.New(rand.NewPCG(uint64(i), 42))
	sp := genSpec{
		Nodes:     5 + r.IntN(6),
		Standby:   r.IntN(4),
		Offline:   r.IntN(2),
		DRBD:      []float64{0, 0.1, 0.25}[r.IntN(3)],
		Plain:     []float64{0, 0, 0.05}[r.IntN(3)],
		Load:      []float64{0.2, 0.4, 0.6, 0.85, 1.0}[r.IntN(5)],
		Instances: 0,
	}
	sp.Instances = sp.Nodes * (2 + r.IntN(4))
	c := genCluster(uint64(1000+i), sp)
	opts := [][2]float64{{2, 2}, {2, 0}, {2, 1}, {2, 3}, {0, 5}, {1, 5}, {3, 5}, {4, 5}, {1, 1}}
	o := opts[r.IntN(len(opts))]
	return c, o[0], o[1]
}

// genLargerSqueezeCase returns clusters of 12 to 18 nodes and up to 90
// instances (hsqueeze still decides them in about a second).
func genLargerSqueezeCase(i int) (*Cluster, float64, float64) {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	sp := genSpec{Nodes: 12 + r.IntN(7), Standby: r.IntN(3), Offline: r.IntN(2), DRBD: []float64{0, 0.1, 0.2}[r.IntN(3)],
		Load: []float64{0.3, 0.5, 0.8, 1.0}[r.IntN(4)]}
	sp.Instances = sp.Nodes * (3 + r.IntN(3))
	c := genCluster(uint64(5000+i), sp)
	opts := [][2]float64{{2, 2}, {2, 1}, {1, 5}, {3, 5}}
	o := opts[r.IntN(len(opts))]
	return c, o[0], o[1]
}
