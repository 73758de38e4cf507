package longhorn

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// benchCluster builds nodes×disks empty-ish disks in three zones and volumes
// with no replicas yet, each wanting replicas.
func benchCluster(tb testing.TB, nodes, disks, volumes, replicas int) *Cluster {
	tb.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	c := &Cluster{Settings: DefaultSettings()}
	for i := range nodes {
		n := &Node{Name: fmt.Sprintf("node-%04d", i), Zone: fmt.Sprintf("zone-%d", i%3), Ready: true, Schedulable: true, AllowScheduling: true}
		for j := range disks {
			maxB := int64(2+r.IntN(7)) << 40
			n.Disks = append(n.Disks, &Disk{
				Name: fmt.Sprintf("disk-%d", j), UUID: fmt.Sprintf("%d-%d", i, j), Path: fmt.Sprintf("/mnt/disk-%d", j),
				Type: "filesystem", AllowScheduling: true, HasStatus: true, Schedulable: true,
				StorageMaximum: maxB, StorageAvailable: maxB - int64(r.IntN(1<<30)),
			})
		}
		c.Nodes = append(c.Nodes, n)
	}
	for i := range volumes {
		c.Volumes = append(c.Volumes, &Volume{
			Name: fmt.Sprintf("pvc-%05d", i), Size: int64(1+r.IntN(100)) << 30, NumberOfReplicas: replicas, Robustness: "healthy",
		})
	}
	if err := c.Index(); err != nil {
		tb.Fatal(err)
	}
	return c
}

// BenchmarkPlace places every replica of every volume; the acceptance size
// is 3 replicas for each of 10,000 volumes on 1,000 nodes with 8 disks.
func BenchmarkPlace(b *testing.B) {
	for _, sz := range []struct{ nodes, disks, volumes int }{
		{100, 8, 1000},
		{1000, 8, 10000},
	} {
		b.Run(fmt.Sprintf("nodes=%d/disks=%d/volumes=%d", sz.nodes, sz.disks, sz.volumes), func(b *testing.B) {
			c := benchCluster(b, sz.nodes, sz.disks, sz.volumes, 3)
			b.ReportAllocs()
			for b.Loop() {
				p, err := Place(c, &PlaceOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if len(p.Placements) != 3*sz.volumes {
					b.Fatalf("placed %d of %d", len(p.Placements), 3*sz.volumes)
				}
			}
		})
	}
}

// BenchmarkRebalance plans one pass and every pass until stable on the
// generated 2,000-node / 20,000-replica state of scaleCluster (and a
// smaller one). The acceptance figures are under 0.5 s of CPU for one pass
// and under 3 s until stable on a 2-core machine.
func BenchmarkRebalance(b *testing.B) {
	for _, sz := range []struct{ nodes, volumes int }{
		{300, 1000},
		{2000, 7000},
	} {
		c := scaleCluster(1, sz.nodes, sz.volumes)
		if err := c.Index(); err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("nodes=%d/replicas=%d", sz.nodes, len(c.Replicas))
		b.Run(name+"/one-pass", func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if _, err := Rebalance(c, &RebalanceOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
		b.Run(name+"/until-stable", func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if _, err := RebalanceUntilStable(c, &RebalanceOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkReadState parses the generated 2,000-node / 20,000-replica
// state from its JSON (SPARSESYNC_SCALE_STATE=FILE, written by
// TestScaleStateJSON), or a 300-node one.
func BenchmarkReadState(b *testing.B) {
	data := clusterJSON(scaleCluster(1, 300, 1000))
	if f := os.Getenv("SPARSESYNC_SCALE_STATE"); f != "" {
		var err error
		if data, err = os.ReadFile(f); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadState("state.json", data); err != nil {
			b.Fatal(err)
		}
	}
}
