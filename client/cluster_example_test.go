package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/rpcd/rpcd/client"
)

// A Cluster spreads calls over a service's nodes. Here the nodes are a
// fixed list; with package discovery/etcd imported, the target
// "etcd://127.0.0.1:2379/math" follows them in etcd instead.
func ExampleDialService() {
	a, stopA := exampleServer()
	defer stopA()
	b, stopB := exampleServer()
	defer stopB()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	k, err := client.DialService(ctx, "static://"+a+","+b+"/math", client.ServiceOptions{
		Balance: client.RoundRobin,
		Options: client.Options{Idempotent: client.RouteSet("Math/Sum")}, // may go to another node after a failure
	})
	if err != nil {
		log.Fatal(err)
	}
	defer k.Close()

	var sums []int
	for i := range 4 {
		var sum int
		if err := k.Call(ctx, "Math/Sum", map[string]int{"a": i, "b": 1}, &sum); err != nil {
			log.Fatal(err)
		}
		sums = append(sums, sum)
	}
	fmt.Println(sums)
	for _, n := range k.Nodes() {
		fmt.Println(n.Calls) // two calls each, in turn
	}
	// Output:
	// [1 2 3 4]
	// 2
	// 2
}
