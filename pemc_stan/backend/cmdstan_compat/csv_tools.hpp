// Shared helpers for pemc-stan's CmdStan-compatible command-line tools
// (bin/stansummary and bin/diagnose).
//
// Both tools read one or more Stan CSV files written by the NUTS sampler with
// Stan's own reader (stan/io/stan_csv_reader.hpp) and assemble them into a
// stan::mcmc::chains object, so that every statistic (mean, sd, quantiles,
// effective sample size, split R-hat) is computed by the Stan library exactly
// as CmdStan 2.35 computes it.
#ifndef PEMC_STAN_CMDSTAN_COMPAT_CSV_TOOLS_HPP
#define PEMC_STAN_CMDSTAN_COMPAT_CSV_TOOLS_HPP

#include <stan/io/stan_csv_reader.hpp>
#include <stan/mcmc/chains.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace pemc_csv {

// Exit status used by CmdStan's tools for failures.
constexpr int EXIT_NOT_OK = 70;

inline bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size()
         && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

inline bool file_readable(const std::string& path) {
  std::ifstream f(path.c_str());
  return f.good();
}

// Draws of all chains plus the per-file information the tools report.
struct chain_set {
  std::unique_ptr<stan::mcmc::chains<>> chains;
  stan::io::stan_csv_metadata metadata;  // of the first file
  int last_max_depth = 10;               // max_depth of the last file read
  std::vector<double> warmup_seconds;
  std::vector<double> sampling_seconds;
  std::vector<int> thin;

  const stan::mcmc::chains<>& get() const { return *chains; }
  double total_sampling_seconds() const {
    double t = 0;
    for (double s : sampling_seconds)
      t += s;
    return t;
  }
  double total_warmup_seconds() const {
    double t = 0;
    for (double s : warmup_seconds)
      t += s;
    return t;
  }
};

// Value of "key = value" in the leading comment block of a Stan CSV file,
// or "" when absent.  (" (Default)" is dropped.)
inline std::string header_value(const std::string& path,
                                const std::string& key) {
  std::ifstream in(path.c_str());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '#')
      break;
    size_t eq = line.find(" = ");
    if (eq == std::string::npos)
      continue;
    size_t b = line.find_first_not_of("# \t");
    if (b == std::string::npos || b >= eq || line.substr(b, eq - b) != key)
      continue;
    std::string v = line.substr(eq + 3);
    size_t d = v.find(" (Default)");
    if (d != std::string::npos)
      v = v.substr(0, d);
    size_t e = v.find_last_not_of(" \t\r");
    return e == std::string::npos ? "" : v.substr(0, e + 1);
  }
  return "";
}

// Parse the given Stan CSV files (one chain each).  Reader messages (for
// example the reader's warning about a missing adaptation block) go to `msgs`
// as they do in CmdStan.  When `require_draws` is set, a file without any
// draw is an error, as in CmdStan's stansummary.
inline chain_set read_chains(const std::vector<std::string>& files,
                             std::ostream* msgs, bool require_draws) {
  chain_set cs;
  for (size_t k = 0; k < files.size(); ++k) {
    std::ifstream in(files[k].c_str());
    if (!in.good())
      throw std::invalid_argument("Cannot read input csv file: " + files[k]
                                  + ".");
    stan::io::stan_csv parsed = stan::io::stan_csv_reader::parse(in, msgs);
    in.close();
    // Stan's reader reads save_warmup as 0/1 only; CmdStan 2.33+ writes
    // true/false, so look the flag up here.
    std::string sw = header_value(files[k], "save_warmup");
    if (sw == "true" || sw == "1")
      parsed.metadata.save_warmup = true;
    else if (sw == "false" || sw == "0")
      parsed.metadata.save_warmup = false;
    if (require_draws && parsed.samples.rows() < 1)
      throw std::invalid_argument("No sampling draws found in Stan CSV file: "
                                  + files[k] + ".");
    if (k == 0) {
      cs.metadata = parsed.metadata;
      cs.chains.reset(new stan::mcmc::chains<>(parsed.header));
    }
    int before = cs.chains->num_chains();
    if (parsed.samples.rows() > 0) {
      cs.chains->add(parsed);  // validates the header against the first file
      // When warmup draws were saved, the reader keeps them in `samples` and
      // chains::add marks `num_warmup` of them as warmup.  With thinning only
      // ceil(num_warmup / thin) warmup rows are in the file, so correct the
      // count (identical to CmdStan whenever thin == 1).
      if (cs.chains->num_chains() > before && parsed.metadata.save_warmup) {
        int chain = cs.chains->num_chains() - 1;
        long th = parsed.metadata.thin > 0 ? parsed.metadata.thin : 1;
        long saved = (static_cast<long>(parsed.metadata.num_warmup) + th - 1)
                     / th;
        long rows = cs.chains->num_samples(chain);
        cs.chains->set_warmup(chain, static_cast<int>(std::min(saved, rows)));
      }
    }
    cs.last_max_depth = parsed.metadata.max_depth;
    cs.warmup_seconds.push_back(parsed.timing.warmup);
    cs.sampling_seconds.push_back(parsed.timing.sampling);
    cs.thin.push_back(static_cast<int>(parsed.metadata.thin));
  }
  return cs;
}

// ---------------------------------------------------------------------------
// Number layout for the fixed-width console table.
//
// A value is shown with `sig` significant digits.  In fixed notation this
// needs `decimals` digits after the point and `width` characters in all.
struct layout {
  int width;
  int decimals;
};

inline layout fixed_layout(double v, int sig) {
  layout l;
  double a = std::fabs(v);
  if (v == 0) {
    l.width = sig;
    l.decimals = sig;
  } else if (std::isnan(v) || std::isinf(v)) {
    l.width = 3;
    l.decimals = sig;
  } else if (a >= 1) {
    int int_digits = static_cast<int>(std::ceil(std::log10(a) + 1e-6));
    if (int_digits >= sig) {
      l.width = int_digits;
      l.decimals = 0;
    } else {
      l.width = sig + 1;
      l.decimals = sig - int_digits;
    }
  } else {
    int leading = static_cast<int>(std::fabs(std::floor(std::log10(a))));
    l.width = 1 + leading + sig;
    l.decimals = leading + sig - 1;
  }
  if (std::signbit(v))
    l.width += 1;
  return l;
}

// Per-column display format: fixed or scientific notation and field width.
struct column_format {
  bool scientific = false;
  int width = 0;
};

// Choose the notation of one column from the values it has to show: fixed
// notation when every value fits in a narrow field, else scientific.
inline column_format choose_format(const std::vector<double>& values,
                                   const std::string& label, int sig) {
  const int pad = 2;
  const int narrow_limit = 8;
  column_format f;
  int widest = 0;
  for (double v : values)
    widest = std::max(widest, fixed_layout(v, sig).width);
  if (widest + pad < narrow_limit) {
    f.scientific = false;
    f.width = std::max<int>(widest, label.size()) + pad;
    return f;
  }
  int sci = sig + 1 + 4;  // mantissa digits, point, exponent
  bool any_negative = false;
  for (double v : values)
    if (v < 0)
      any_negative = true;
  if (any_negative)
    ++sci;
  f.scientific = true;
  f.width = std::max<int>(sci, label.size()) + pad;
  return f;
}

inline int display_decimals(double v, int sig, bool scientific) {
  return scientific ? sig - 1 : fixed_layout(v, sig).decimals;
}

// ---------------------------------------------------------------------------
// Container handling: Stan CSV lists container elements in column-major
// order; the summary lists them in row-major order (last index fastest).

// Split "name[i,j,...]" into base name and integer indices.  Returns false
// when the column name is not a plain indexed element.
inline bool parse_indexed(const std::string& name, std::string& base,
                          std::vector<int>& idx) {
  size_t open = name.find('[');
  if (open == std::string::npos || open == 0 || name.back() != ']')
    return false;
  base = name.substr(0, open);
  idx.clear();
  std::string inner = name.substr(open + 1, name.size() - open - 2);
  std::stringstream ss(inner);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    if (tok.empty()
        || tok.find_first_not_of("0123456789") != std::string::npos)
      return false;
    idx.push_back(std::stoi(tok));
  }
  return !idx.empty();
}

inline std::string base_name(const std::string& name) {
  return name.substr(0, name.find('['));
}

// Order in which the columns [first, last) of the chains are listed.
// Containers whose elements form a complete column-major block are listed
// in row-major order; anything else keeps file order.
inline std::vector<int> display_order(const stan::mcmc::chains<>& ch,
                                      int first, int last) {
  std::vector<int> order;
  int i = first;
  while (i < last) {
    const std::string& nm = ch.param_name(i);
    if (nm.find('[') == std::string::npos) {
      order.push_back(i);
      ++i;
      continue;
    }
    std::string base = base_name(nm);
    int end = i + 1;
    while (end < last && base_name(ch.param_name(end)) == base)
      ++end;
    int count = end - i;
    // dimensions are the indices of the last element of the block
    std::string b;
    std::vector<int> dims, idx;
    bool ok = parse_indexed(ch.param_name(end - 1), b, dims);
    long total = 1;
    if (ok)
      for (int d : dims)
        total *= d;
    if (ok && total == count) {
      // check that element k has the column-major index it should have
      for (int k = 0; k < count && ok; ++k) {
        if (!parse_indexed(ch.param_name(i + k), b, idx)
            || idx.size() != dims.size()) {
          ok = false;
          break;
        }
        long off = 0, stride = 1;
        for (size_t d = 0; d < dims.size(); ++d) {
          off += (idx[d] - 1) * stride;
          stride *= dims[d];
        }
        if (off != k)
          ok = false;
      }
    } else {
      ok = false;
    }
    if (!ok) {
      for (int k = i; k < end; ++k)
        order.push_back(k);
    } else {
      std::vector<int> cur(dims.size(), 1);
      for (int k = 0; k < count; ++k) {
        long off = 0, stride = 1;
        for (size_t d = 0; d < dims.size(); ++d) {
          off += (cur[d] - 1) * stride;
          stride *= dims[d];
        }
        order.push_back(i + static_cast<int>(off));
        // advance, last index fastest
        for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
          if (++cur[d] <= dims[d])
            break;
          cur[d] = 1;
        }
      }
    }
    i = end;
  }
  return order;
}

}  // namespace pemc_csv

#endif
