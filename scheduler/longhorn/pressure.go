package longhorn

import "time"

// DiskPressure reports, for every disk of every node of c, whether it is
// under disk pressure by the predicate [Rebalance] applies before it plans a
// disk-pressure move (see the package documentation): with threshold T ≠ 0,
// floor(max(0, available − reserved) × 100 / max) < 100 − T. The result is
// keyed by node name, then disk name. It does not modify c.
func DiskPressure(c *Cluster) (map[string]map[string]bool, error) {
	if err := c.indexOnce(); err != nil {
		return nil, err
	}
	w := newWorld(c, time.Time{})
	out := make(map[string]map[string]bool, len(c.Nodes))
	for _, n := range c.Nodes {
		m := make(map[string]bool, len(n.Disks))
		for _, d := range n.Disks {
			m[d.Name] = w.underPressure(d.idx)
		}
		out[n.Name] = m
	}
	return out, nil
}
