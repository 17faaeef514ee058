// A franz-go consumer for the KIP-848 tests, run as a child process like consumer_worker.py and
// ConsumerMember.java, writing the same lines to OUT_PATH: "assign P...", "revoke P..." (lost partitions too),
// "record P OFFSET VALUE" once the record's offset is committed (a failed commit reads the record again),
// "closed" after Close (which leaves the group).
//
// Usage: kip848member BOOTSTRAP GROUP TOPIC OUT_PATH [PROTOCOL]
// PROTOCOL is consumer (the default: kgo.ServerSideBalancer, franz-go's opt-in to KIP-848 on a broker with
// ConsumerGroupHeartbeat v1) or classic (JoinGroup/SyncGroup with the cooperative-sticky balancer).
// SIGTERM closes; SIGKILL leaves the member to its session timeout.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const runFor = 240 * time.Second

var (
	outMu sync.Mutex
	out   *os.File
)

func emit(line string) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Fprintln(out, line)
	out.Sync()
}

func partitions(m map[string][]int32) string {
	var ids []int
	for _, ps := range m {
		for _, p := range ps {
			ids = append(ids, int(p))
		}
	}
	sort.Ints(ids)
	var sb strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&sb, " %d", id)
	}
	return sb.String()
}

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: kip848member BOOTSTRAP GROUP TOPIC OUT_PATH [consumer|classic]")
		os.Exit(2)
	}
	bootstrap, group, topic, outPath := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	protocol := "consumer"
	if len(os.Args) > 5 {
		protocol = os.Args[5]
	}
	var err error
	out, err = os.OpenFile(outPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID("franz-kip848"),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emit("assign" + partitions(m))
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emit("revoke" + partitions(m))
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			emit("revoke" + partitions(m))
		}),
	}
	switch protocol {
	case "consumer":
		opts = append(opts, kgo.ServerSideBalancer())
	case "classic":
	default:
		fmt.Fprintln(os.Stderr, "protocol must be consumer or classic")
		os.Exit(2)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM)
	go func() {
		<-signals
		cancel()
	}()
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			emit(fmt.Sprintf("error %s %d %v", t, p, err))
		})
		reread := map[int32]bool{} // a failed commit: the rest of that partition's batch is read again
		fetches.EachRecord(func(r *kgo.Record) {
			if reread[r.Partition] {
				return
			}
			if err := cl.CommitRecords(context.Background(), r); err != nil {
				emit(fmt.Sprintf("commit-failed %d %d %v", r.Partition, r.Offset, err))
				reread[r.Partition] = true
				cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{
					r.Topic: {r.Partition: {Epoch: -1, Offset: r.Offset}},
				})
				return
			}
			emit(fmt.Sprintf("record %d %d %s", r.Partition, r.Offset, string(r.Value)))
		})
	}
	cl.Close() // leaves the group
	emit("closed")
}
