package ganeti_test

import (
	"fmt"
	"strings"

	"github.com/sparsesync/sparsesync/scheduler/ganeti"
)

const exampleCluster = `group-01|uuid-01|preferred|

master|8192|0|6144|102400|102400|8|M|uuid-01
node-1|8192|0|7168|102400|102400|8|N|uuid-01
node-2|8192|0|7168|102400|102400|8|N|uuid-01
spare|8192|0|8192|102400|102400|8|Y|uuid-01|1|htools:standby:auto

web-1|1024|0|1|running|Y|master||ext|
web-2|1024|0|1|running|Y|master||ext|
db-1|1024|0|1|running|Y|node-1||ext|
db-2|1024|0|1|running|Y|node-2||ext|

`

func ExampleSqueeze() {
	c, err := ganeti.ReadText(strings.NewReader(exampleCluster), "example.data")
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := ganeti.Squeeze(c, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Action, res.Nodes)
	for _, m := range res.Moves {
		fmt.Println(m.Instance, m.From, "=>", m.To)
	}
	// Output:
	// offline [node-1 node-2]
	// db-1 node-1 => master
	// db-2 node-2 => master
}

func ExampleBalance() {
	c, err := ganeti.ReadText(strings.NewReader(exampleCluster), "example.data")
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := ganeti.Balance(c, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%.4f -> %.4f in %d moves\n", res.InitialScore, res.FinalScore, len(res.Moves))
	// Output:
	// 2.0035 -> 2.0035 in 0 moves
}
