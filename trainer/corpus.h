// numgate-train — the synthetic corpus (CPU, deterministic from a seed; no network).
//
// Gate 3 (SPEC §6) needs a task whose loss falls well below ln(vocab) in 200 steps, drawn
// identically for the reference and the target path, in a fixed batch order. Every token
// is a pure function of (seed, batch index, sequence, position) through numgate's Philox
// stream (numgate/random.h), so the batches are bitwise the same on every machine.
//
// Vocabulary (CorpusConfig::vocab = 1024): 0 = PAD, 1 = BOS, 2 = COPY marker, 3 .. vocab-1
// content tokens (M = vocab - 3 = 1021, a prime, so every affine map below is a
// permutation of the content tokens).
//
// One document per sequence: BOS, then content until its length (uniform in [S/2, S]), then
// PAD to S. Content is a mixture, switched per span:
//   - a Zipf order-2 Markov language: the next token after (a, b) is
//       3 + (h1(b) + h2(a) + rank * c(b)) mod M,   rank ~ Zipf(zipf_exponent) on 0 .. M-1,
//     h1, c: per-token Philox hashes (c in 1 .. M-1), h2(a) in {0, (M-1)/2}: the previous
//     token b picks the law, the one before, a, picks one of its two halves (order 2: a
//     model that sees only b pays up to ln 2 more);
//   - copy segments (with probability copy_probability per span): COPY, L random uniform
//     content tokens (L uniform in [8, 32]), COPY, the same L tokens again: the second copy
//     is predictable only by attending back (induction), which rewards attention.
// Targets: next token; the last content token and every PAD position get ignore_index
// (-100), as a framework's collator marks padding.
//
// The Markov part's conditional entropy is the entropy of the truncated Zipf law
// (zipf_entropy()): a floor the loss approaches from above (copies lower it further).
#pragma once

#include <cstdint>
#include <vector>

namespace numgate::train {

inline constexpr std::int32_t kPad = 0, kBos = 1, kCopy = 2, kFirstContent = 3;
inline constexpr std::int64_t kIgnoreIndex = -100;

struct CorpusConfig {
  std::int64_t vocab = 1024;
  std::int64_t batch = 16;
  std::int64_t seq = 256;
  double zipf_exponent = 1.5;
  double copy_probability = 0.25;  ///< per span (a span is a copy segment or 32 Markov tokens)
};

struct Batch {
  std::vector<std::int32_t> tokens;   ///< [batch, seq] input ids
  std::vector<std::int64_t> targets;  ///< [batch, seq] next ids, kIgnoreIndex where padded
  std::vector<std::int64_t> positions;  ///< [batch * seq] position ids (0 .. seq-1 per sequence)
  std::int64_t valid = 0;             ///< targets != kIgnoreIndex
};

/// Batch `index` of the corpus of `seed` (pure function of its arguments).
/// Throws std::invalid_argument for vocab < 64 or vocab - 3 not prime, batch < 1, seq
/// outside [64, 2^19] (a sequence's draws are counted in a window of 2^20).
Batch make_batch(const CorpusConfig& c, std::uint64_t seed, std::uint64_t index);

/// Entropy in nats of Zipf(s) truncated to ranks 0 .. m-1 (P(r) ~ (r + 1)^-s).
double zipf_entropy(double s, std::int64_t m);

}  // namespace numgate::train
