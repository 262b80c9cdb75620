package collective_test

import (
	"context"
	"fmt"
	"net"
	"sync"

	"github.com/easyscale/easyscale-slurm/runtime/auth"
	"github.com/easyscale/easyscale-slurm/runtime/collective"
)

// Three processes (goroutines here, each with its own loopback listener)
// hold the gradients of four ESTs split 1|0|3 and all get the mean in
// canonical EST order.
func Example() {
	secret, _ := auth.GenerateSecret()
	job := &auth.Config{JobID: "example", Secret: secret}
	grads := [][]float32{{1, 10}, {2, 20}, {3, 30}, {4, 40}} // EST 0..3
	split := [][2]int{{0, 1}, {1, 1}, {1, 4}}                // [firstEST, end) per rank

	var lns []*net.TCPListener
	var members []collective.Member
	for r := range 3 {
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			fmt.Println(err)
			return
		}
		defer ln.Close()
		lns = append(lns, ln)
		members = append(members, collective.Member{Rank: r, Addr: ln.Addr().String()})
	}
	outs := make([][]float32, 3)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			ring, err := collective.Connect(context.Background(), r, members, lns[r], collective.Options{Auth: job})
			if err != nil {
				fmt.Println(err)
				return
			}
			defer ring.Close()
			outs[r] = make([]float32, 2)
			lo, hi := split[r][0], split[r][1]
			if err := ring.AllReduce(context.Background(), outs[r], grads[lo:hi], lo, float32(1)/4); err != nil {
				fmt.Println(err)
			}
		})
	}
	wg.Wait()
	fmt.Println(outs)
	// Output:
	// [[2.5 25] [2.5 25] [2.5 25]]
}
