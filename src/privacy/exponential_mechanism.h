// The exponential mechanism, accounted as zero-concentrated DP so that it
// composes with Gaussian releases in the same Renyi accounting.
//
// ExponentialPick returns candidate i with probability proportional to
// exp(epsilon x score_i / (2 x sensitivity)), where `sensitivity` bounds how
// much any one score moves when one record is added or removed. It is
// epsilon-DP and epsilon-bounded-range, hence (epsilon^2 / 8)-zCDP (Cesar and
// Rogers 2021, "Bounding, concentrating, and truncating: unifying privacy loss
// composition for data analytics", Lemma 3.2), i.e. Renyi DP of
// alpha epsilon^2 / 8 at every order alpha: the same form as a Gaussian
// mechanism of noise multiplier sigma (alpha / (2 sigma^2)). So R rounds at
// RoundEpsilon(sigma, share, R) spend exactly what a Gaussian release of
// multiplier sigma / sqrt(share) spends (share / (2 sigma^2) per unit order).
// This is how MST (McKenna et al. 2021) accounts its selection rounds.
//
// The draw uses one uniform from the ChaCha20 stream (SecureGaussian::Uniform),
// inverse-CDF over the weights in double precision (the idealised,
// continuous-arithmetic guarantee, as for the Gaussian noise).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "privacy/secure_noise.h"

namespace ds {

// The per-round epsilon of `rounds` exponential-mechanism rounds that
// together spend `share` of a Gaussian release of noise multiplier sigma:
// rounds x epsilon^2 / 8 = share / (2 sigma^2), epsilon = sqrt(4 share / rounds) / sigma.
double RoundEpsilon(double sigma, double share, int rounds);

// Index i in [0, scores.size()) drawn with probability proportional to
// exp(epsilon (scores[i] - max) / (2 sensitivity)). scores must not be empty.
size_t ExponentialPick(const std::vector<double>& scores, double epsilon, double sensitivity,
                       SecureGaussian* noise);

// Greedy selection of directed pairs (parent a, child b), a < b, over
// `columns` columns: `rounds` exponential-mechanism picks (sensitivity 1 at
// `round_epsilon` each) among the pairs not yet chosen whose child has fewer
// than `per_child` parents; scores[k] is pair k's score in the b-major order
// (0,1), (0,2), (1,2), (0,3), ... Which pairs are eligible depends only on
// the earlier picks (adaptive composition). Returns the parents of each
// column, ascending. Stops early when no pair is eligible.
std::vector<std::vector<int>> SelectPairs(const std::vector<double>& scores, int columns,
                                          int rounds, int per_child, double round_epsilon,
                                          SecureGaussian* noise);

}  // namespace ds
