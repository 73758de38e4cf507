package longhorn

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the files under testdata/: a cluster (compact form,
// or Longhorn JSON) goes in, each command's decision comes out.
func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			var c *Cluster
			datadriven.RunTest(t, file, func(t *testing.T, d *datadriven.TestData) string {
				args := map[string]string{}
				for _, a := range d.CmdArgs {
					args[a.Key] = strings.Join(a.Vals, ",")
				}
				var now time.Time
				if s, ok := args["now"]; ok {
					var err error
					if now, err = time.Parse(time.RFC3339, s); err != nil {
						d.Fatalf(t, "now: %v", err)
					}
				}
				need := func() *Cluster {
					if c == nil {
						d.Fatalf(t, "no cluster defined")
					}
					return c
				}
				switch d.Cmd {
				case "cluster":
					var err error
					c, err = buildCluster(d.Input)
					if err != nil {
						c = nil
						return "error: " + err.Error() + "\n"
					}
					return "ok\n"
				case "json":
					var err error
					c, err = ReadState("state.json", []byte(d.Input))
					if err != nil {
						c = nil
						return "error: " + err.Error() + "\n"
					}
					return summarize(c)
				case "place":
					p, err := Place(need(), &PlaceOptions{Volume: args["volume"], Now: now})
					if err != nil {
						return "error: " + err.Error() + "\n"
					}
					if _, ok := args["json"]; ok {
						b, _ := json.Marshal(p)
						return string(b) + "\n"
					}
					return p.Text()
				case "rebalance":
					_, until := args["until-stable"]
					ro := RebalanceOptions{Now: now, UntilStable: until}
					if s, ok := args["max-passes"]; ok {
						ro.MaxPasses, _ = strconv.Atoi(s)
					}
					p, err := PlanRebalance(need(), &ro)
					var out string
					if _, ok := args["json"]; ok && p != nil {
						b, _ := json.Marshal(p)
						out = string(b) + "\n"
					} else if p != nil {
						out = p.Text()
					}
					if err != nil {
						out += "error: " + err.Error() + "\n"
					}
					return out
				case "cpu":
					p := PlanCPU(need())
					if _, ok := args["json"]; ok {
						b, _ := json.Marshal(p)
						return string(b) + "\n"
					}
					return p.Text()
				case "migrate":
					ch, err := MigrateDeprecatedCPU(need())
					if err != nil {
						return "error: " + err.Error() + "\n"
					}
					return ChangesText(ch)
				case "disks":
					return describeDisks(newWorld(need(), now))
				case "fits":
					c := need()
					w := newWorld(c, now)
					vi, ok := c.volByName[args["volume"]]
					if !ok {
						d.Fatalf(t, "no volume %q", args["volume"])
					}
					v := c.Volumes[vi]
					var b strings.Builder
					for _, disk := range c.disks {
						r := w.capacityReason(disk.idx, v.Size, v.ActualSize)
						if r == "" {
							r = "fits"
						}
						fmt.Fprintf(&b, "%s/%s: %s, pressure-safe=%v\n", c.Nodes[disk.node].Name, disk.Name, r, w.pressureSafe(disk.idx, v.ActualSize))
					}
					return b.String()
				default:
					d.Fatalf(t, "unknown command %q", d.Cmd)
					return ""
				}
			})
		})
	}
}

func summarize(c *Cluster) string {
	var b strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "node %s zone=%q ready=%v schedulable=%v allow=%v tags=%v alloc=%dm em=%d rm=%d im=%d\n",
			n.Name, n.Zone, n.Ready, n.Schedulable, n.AllowScheduling, n.Tags, n.AllocatableMilliCPU,
			n.EngineManagerCPURequest, n.ReplicaManagerCPURequest, n.InstanceManagerCPURequest)
		for _, d := range n.Disks {
			fmt.Fprintf(&b, "  disk %s uuid=%s type=%s max=%d avail=%d reserved=%d scheduled=%d allow=%v schedulable=%v tags=%v\n",
				d.Name, d.UUID, d.Type, d.StorageMaximum, d.StorageAvailable, d.StorageReserved, d.StorageScheduled,
				d.AllowScheduling, d.Schedulable, d.Tags)
		}
	}
	for _, v := range c.Volumes {
		fmt.Fprintf(&b, "volume %s size=%d actual=%d replicas=%d robustness=%s anti=%q/%q/%q balance=%q\n",
			v.Name, v.Size, v.ActualSize, v.NumberOfReplicas, v.Robustness,
			v.ReplicaSoftAntiAffinity, v.ReplicaZoneSoftAntiAffinity, v.ReplicaDiskSoftAntiAffinity, v.ReplicaAutoBalance)
	}
	for _, r := range c.Replicas {
		fmt.Fprintf(&b, "replica %s volume=%s node=%s disk=%s failed=%v retries=%d evicting=%v\n",
			r.Name, r.VolumeName, r.NodeID, r.DiskID, r.FailedAt != "", r.RebuildRetryCount, r.EvictionRequested)
	}
	s := c.Settings
	fmt.Fprintf(&b, "settings node-soft=%v zone-soft=%v disk-soft=%v min-avail=%d over-prov=%d balance=%s pressure=%d wait=%s\n",
		s.ReplicaSoftAntiAffinity, s.ReplicaZoneSoftAntiAffinity, s.ReplicaDiskSoftAntiAffinity,
		s.StorageMinimalAvailablePercentage, s.StorageOverProvisioningPercentage, s.ReplicaAutoBalance,
		s.ReplicaAutoBalanceDiskPressurePercentage, s.ReplicaReplenishmentWaitInterval)
	return b.String()
}
