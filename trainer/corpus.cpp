// numgate-train — the synthetic corpus (corpus.h says what it is).
#include "corpus.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "numgate/random.h"

namespace numgate::train {
namespace {

bool is_prime(std::int64_t m) {
  if (m < 2) return false;
  for (std::int64_t d = 2; d * d <= m; ++d)
    if (m % d == 0) return false;
  return true;
}

// Philox stream ids of the corpus (RandomStream(seed, stream)); distinct from each other.
enum Stream : std::uint32_t { kHashStream = 0x70000001, kDocStream = 0x70000002 };

// The cumulative Zipf law over ranks 0 .. m-1, for inverse-CDF sampling.
std::vector<double> zipf_cdf(double s, std::int64_t m) {
  std::vector<double> cdf(static_cast<std::size_t>(m));
  double acc = 0;
  for (std::int64_t r = 0; r < m; ++r) {
    acc += std::pow(static_cast<double>(r + 1), -s);
    cdf[static_cast<std::size_t>(r)] = acc;
  }
  for (double& v : cdf) v /= acc;
  return cdf;
}

}  // namespace

double zipf_entropy(double s, std::int64_t m) {
  double z = 0, h = 0;
  for (std::int64_t r = 0; r < m; ++r) z += std::pow(static_cast<double>(r + 1), -s);
  for (std::int64_t r = 0; r < m; ++r) {
    const double p = std::pow(static_cast<double>(r + 1), -s) / z;
    h -= p * std::log(p);
  }
  return h;
}

Batch make_batch(const CorpusConfig& c, std::uint64_t seed, std::uint64_t index) {
  const std::int64_t m = c.vocab - kFirstContent;
  if (c.vocab < 64 || !is_prime(m))
    throw std::invalid_argument("corpus: vocab " + std::to_string(c.vocab) +
                                " must be >= 64 with vocab - 3 prime (content tokens form a prime field)");
  if (c.batch < 1 || c.seq < 64 || c.seq > (1 << 19))
    throw std::invalid_argument("corpus: batch must be >= 1 and seq in [64, 2^19] (got batch " + std::to_string(c.batch) +
                                ", seq " + std::to_string(c.seq) + ")");
  // Per-token hashes of the Markov law: fixed by the seed, the same for every batch.
  const RandomStream hash(seed, kHashStream);
  std::vector<std::int64_t> h1(static_cast<std::size_t>(c.vocab)), mul(h1.size()), h2(h1.size());
  for (std::int64_t t = 0; t < c.vocab; ++t) {
    const auto i = static_cast<std::uint64_t>(t);
    h1[static_cast<std::size_t>(t)] = static_cast<std::int64_t>(hash.uniform(i, 0) * static_cast<double>(m));
    mul[static_cast<std::size_t>(t)] = 1 + static_cast<std::int64_t>(hash.uniform(i, 1) * static_cast<double>(m - 1));
    h2[static_cast<std::size_t>(t)] = hash.uniform(i, 2) < 0.5 ? 0 : (m - 1) / 2;
  }
  const std::vector<double> cdf = zipf_cdf(c.zipf_exponent, m);

  Batch b;
  const auto n = static_cast<std::size_t>(c.batch * c.seq);
  b.tokens.assign(n, kPad);
  b.targets.assign(n, kIgnoreIndex);
  b.positions.resize(n);
  // One stream per batch; element ids count the draws of each sequence (2^20 apart).
  const RandomStream doc(seed, kDocStream);
  for (std::int64_t s = 0; s < c.batch; ++s) {
    std::uint64_t draw = (index * static_cast<std::uint64_t>(c.batch) + static_cast<std::uint64_t>(s)) << 20;
    auto u = [&](std::uint32_t k = 0) { return doc.uniform(draw++, k); };
    std::int32_t* tok = b.tokens.data() + s * c.seq;
    const std::int64_t len = c.seq / 2 + static_cast<std::int64_t>(u() * static_cast<double>(c.seq / 2 + 1));
    tok[0] = kBos;
    std::int64_t t = 1;
    auto markov_next = [&](std::int64_t a, std::int64_t bb) {
      const double x = u();
      const auto rank = static_cast<std::int64_t>(std::lower_bound(cdf.begin(), cdf.end(), x) - cdf.begin());
      const std::int64_t r = std::min<std::int64_t>(rank, m - 1);
      const std::int64_t v = (h1[bb] + h2[a] + r * mul[bb]) % m;
      return static_cast<std::int32_t>(kFirstContent + v);
    };
    while (t < len) {
      if (u() < c.copy_probability && t + 2 * 8 + 2 < len) {
        const std::int64_t room = (len - t - 2) / 2;
        const std::int64_t l = std::min<std::int64_t>(room, 8 + static_cast<std::int64_t>(u() * 25.0));
        tok[t++] = kCopy;
        const std::int64_t start = t;
        for (std::int64_t j = 0; j < l; ++j)
          tok[t++] = static_cast<std::int32_t>(kFirstContent + static_cast<std::int64_t>(u() * static_cast<double>(m)));
        tok[t++] = kCopy;
        for (std::int64_t j = 0; j < l; ++j) tok[t++] = tok[start + j];
      } else {
        for (std::int64_t j = 0; j < 32 && t < len; ++j, ++t)
          tok[t] = markov_next(t >= 2 ? tok[t - 2] : kBos, tok[t - 1]);
      }
    }
    for (std::int64_t j = 0; j < c.seq; ++j) {
      b.positions[static_cast<std::size_t>(s * c.seq + j)] = j;
      if (j + 1 < len) b.targets[static_cast<std::size_t>(s * c.seq + j)] = tok[j + 1];
    }
  }
  b.valid = static_cast<std::int64_t>(std::count_if(b.targets.begin(), b.targets.end(),
                                                    [](std::int64_t v) { return v != kIgnoreIndex; }));
  return b;
}

}  // namespace numgate::train
