package federated

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// Partition names how the training examples are split over the clients.
type Partition string

const (
	// PartitionIID deals a uniformly random permutation of the examples into N parts whose
	// sizes differ by at most one.
	PartitionIID Partition = "iid"
	// PartitionLabel is the non-IID split by label of McMahan et al. (2017, "Communication-
	// efficient learning of deep networks from decentralized data", §3): the examples are
	// sorted by label (ties in random order), cut into N·S contiguous shards of nearly equal
	// size, and each client receives S shards chosen at random. With S = 2 (the default) a
	// client holds examples of at most about two labels (a shard may straddle a label
	// boundary, so occasionally three or four).
	PartitionLabel Partition = "label"
)

// DefaultShards is the number of label shards per client of PartitionLabel.
const DefaultShards = 2

// partitionStream keeps the partition's random numbers apart from other uses of the seed.
const partitionStream = 0x6a09_e667_f3bc_c908

// PartitionIndices splits the n examples with labels labels (len n; only PartitionLabel reads
// them) over clients clients, reproducibly from seed. shards is the number of label shards per
// client (PartitionLabel; 0 means DefaultShards). Every client gets at least one example and
// every example goes to exactly one client; each part is sorted.
func PartitionIndices(p Partition, labels []int, clients, shards int, seed uint64) ([][]int, error) {
	n := len(labels)
	if clients < 1 {
		return nil, fmt.Errorf("federated: partition: clients = %d, want ≥ 1", clients)
	}
	rng := rand.New(rand.NewPCG(seed, partitionStream))
	parts := make([][]int, clients)
	switch p {
	case PartitionIID, "":
		if n < clients {
			return nil, fmt.Errorf("federated: partition iid: %d examples for %d clients: want at least one example per client", n, clients)
		}
		perm := rng.Perm(n)
		for c := range clients {
			lo, hi := c*n/clients, (c+1)*n/clients
			parts[c] = append([]int(nil), perm[lo:hi]...)
		}
	case PartitionLabel:
		if shards == 0 {
			shards = DefaultShards
		}
		if shards < 1 {
			return nil, fmt.Errorf("federated: partition label: shards = %d per client, want ≥ 1", shards)
		}
		if clients > n/shards {
			return nil, fmt.Errorf("federated: partition label: %d examples for %d clients × %d shards: want at least one example per shard", n, clients, shards)
		}
		// Sort by (label, random key): a random order within each label.
		perm := rng.Perm(n)
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int {
			if labels[a] != labels[b] {
				return labels[a] - labels[b]
			}
			return perm[a] - perm[b]
		})
		ns := clients * shards
		shardOf := rng.Perm(ns) // client c gets shards shardOf[c*shards : (c+1)*shards]
		for c := range clients {
			for _, s := range shardOf[c*shards : (c+1)*shards] {
				lo, hi := s*n/ns, (s+1)*n/ns
				parts[c] = append(parts[c], order[lo:hi]...)
			}
		}
	default:
		return nil, fmt.Errorf("federated: partition %q: want iid or label", p)
	}
	for _, part := range parts {
		slices.Sort(part)
	}
	return parts, nil
}
