package metrics

import (
	"fmt"
	"math"
	"sort"
)

// AUC is the area under the ROC curve of scores against positive: the probability that a
// random positive scores above a random negative, a tie counting one half (the Mann-Whitney
// statistic, from the ranks after one sort). It needs every score of the split at once, which
// is why it runs on Collected values in a finalizer and not as a per-batch sum. Refused: unequal
// lengths, a NaN score, a split with no positive or no negative.
func AUC(scores []float64, positive []bool) (float64, error) {
	if len(scores) != len(positive) {
		return 0, fmt.Errorf("metrics: AUC: %d scores, %d labels; want one label per score", len(scores), len(positive))
	}
	idx := make([]int, len(scores))
	for i := range idx {
		if math.IsNaN(scores[i]) {
			return 0, fmt.Errorf("metrics: AUC: score %d is NaN; a NaN cannot be ranked", i)
		}
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return scores[idx[a]] < scores[idx[b]] })
	var pos, neg int
	rankSum := 0.0 // the positives' ranks, ties given their mean rank (1-based)
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && scores[idx[j]] == scores[idx[i]] {
			j++
		}
		mean := float64(i+j+1) / 2 // ranks i+1..j
		for k := i; k < j; k++ {
			if positive[idx[k]] {
				pos++
				rankSum += mean
			} else {
				neg++
			}
		}
		i = j
	}
	if pos == 0 || neg == 0 {
		return 0, fmt.Errorf("metrics: AUC: %d positives and %d negatives; an AUC needs at least one of each", pos, neg)
	}
	return (rankSum - float64(pos)*float64(pos+1)/2) / (float64(pos) * float64(neg)), nil
}
