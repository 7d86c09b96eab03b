// bin/stansummary of pemc-stan's CmdStan-compatible installation.
//
// Summarises the draws of one or more Stan CSV files from the NUTS sampler
// the way CmdStan 2.35's stansummary does: one row per column of the CSV
// (lp__, then the sampler diagnostics, then the model's variables with
// container elements in row-major order) and the columns
//   Mean, MCSE, StdDev, <percentiles>%, N_Eff, N_Eff/s, R_hat
// where N_Eff is stan::mcmc::chains::effective_sample_size, MCSE is
// StdDev / sqrt(N_Eff) and R_hat is the classic split R-hat.  A fixed-width
// table goes to stdout; --csv_filename also writes the table as CSV (the form
// cmdstanpy's CmdStanMCMC.summary() reads).
#include "csv_tools.hpp"

#include <cstdio>
#include <iomanip>
#include <ios>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

const char* kUsage =
    "Usage: stansummary [OPTIONS] stan_csv_file(s)\n"
    "Summary statistics of the draws in one or more Stan CSV files written by\n"
    "the NUTS-HMC sampler.\n"
    "Example:  stansummary model_chain_1.csv model_chain_2.csv\n"
    "Options:\n"
    "  -a, --autocorr [n]          Also print the autocorrelations of the n-th\n"
    "                              input file (1-based).\n"
    "  -c, --csv_filename [file]   Also write the statistics to this CSV file.\n"
    "  -h, --help                  Print this message and exit.\n"
    "  -i, --include_param [name]  Summarise only this model variable (may be\n"
    "                              repeated; 'theta.1' and 'theta[1]' both work).\n"
    "  -p, --percentiles [values]  Comma-separated, increasing integers in\n"
    "                              [1, 99]. Default: 5,50,95.\n"
    "  -s, --sig_figs [n]          Significant figures, an integer in [1, 18].\n"
    "                              Default: 2.\n";

struct options {
  int sig_figs = 2;
  bool sig_figs_given = false;
  bool autocorr_given = false;
  long autocorr = 0;
  bool csv_given = false;
  std::string csv_filename;
  std::string percentiles = "5,50,95";
  std::vector<std::string> include;
  std::vector<std::string> files;
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos)
    return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

bool parse_int(const std::string& text, long& value) {
  std::string t = trim(text);
  if (t.empty())
    return false;
  try {
    size_t used = 0;
    value = std::stol(t, &used);
    return used == t.size();
  } catch (const std::exception&) {
    return false;
  }
}

// theta.1.2 -> theta[1,2]
std::string bracket_name(const std::string& raw) {
  std::string s = trim(raw);
  size_t dot = s.find('.');
  if (dot != std::string::npos && dot > 0) {
    std::string head = s.substr(0, dot);
    std::string rest = s.substr(dot + 1);
    std::replace(rest.begin(), rest.end(), '.', ',');
    return head + "[" + rest + "]";
  }
  return s;
}

// Returns -1 when parsing succeeded, else the exit status.
int parse_args(int argc, const char* argv[], options& opt) {
  enum kind { SIG, AUTO, CSV, PCT, INCL, HELP, NONE };
  auto classify = [](const std::string& name) -> kind {
    if (name == "--sig_figs" || name == "-s")
      return SIG;
    if (name == "--autocorr" || name == "-a")
      return AUTO;
    if (name == "--csv_filename" || name == "--csv_file" || name == "-c")
      return CSV;
    if (name == "--percentiles" || name == "-p")
      return PCT;
    if (name == "--include_param" || name == "--model_param" || name == "-i")
      return INCL;
    if (name == "--help" || name == "-h")
      return HELP;
    return NONE;
  };
  bool only_files = false;
  for (int k = 1; k < argc; ++k) {
    std::string arg = argv[k];
    if (only_files || arg.size() < 2 || arg[0] != '-') {
      opt.files.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_files = true;
      continue;
    }
    std::string name = arg, value;
    bool has_value = false;
    size_t eq = arg.find('=');
    if (arg.compare(0, 2, "--") == 0) {
      if (eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        has_value = true;
      }
    } else if (arg.size() > 2) {  // -s3 or -s=3
      name = arg.substr(0, 2);
      value = arg.substr(arg[2] == '=' ? 3 : 2);
      has_value = true;
    }
    kind kd = classify(name);
    if (kd == NONE) {
      std::cout << "The following argument was not expected: " << arg
                << std::endl
                << "Run with --help for more information." << std::endl;
      return pemc_csv::EXIT_NOT_OK;
    }
    if (kd == HELP) {
      std::cout << kUsage << std::endl;
      return 0;
    }
    if (!has_value) {
      if (k + 1 >= argc) {
        std::cout << name << ": 1 required argument missing" << std::endl
                  << "Run with --help for more information." << std::endl;
        return pemc_csv::EXIT_NOT_OK;
      }
      value = argv[++k];
    }
    long n = 0;
    switch (kd) {
      case SIG:
        if (!parse_int(value, n) || n < 1 || n > 18) {
          std::cout << "--sig_figs: Value " << trim(value)
                    << " not in range [1 - 18]" << std::endl
                    << "Run with --help for more information." << std::endl;
          return pemc_csv::EXIT_NOT_OK;
        }
        opt.sig_figs = static_cast<int>(n);
        opt.sig_figs_given = true;
        break;
      case AUTO:
        if (!parse_int(value, n) || n < 1) {
          std::cout << "--autocorr: Value " << trim(value)
                    << " should be a positive number" << std::endl
                    << "Run with --help for more information." << std::endl;
          return pemc_csv::EXIT_NOT_OK;
        }
        opt.autocorr = n;
        opt.autocorr_given = true;
        break;
      case CSV:
        opt.csv_filename = trim(value);
        opt.csv_given = true;
        break;
      case PCT:
        opt.percentiles = value;
        break;
      case INCL: {
        opt.include.push_back(bracket_name(value));
        // like CmdStan, --include_param takes every following non-option word
        while (k + 1 < argc && argv[k + 1][0] != '-'
               && !pemc_csv::file_readable(argv[k + 1]))
          opt.include.push_back(bracket_name(argv[++k]));
        break;
      }
      default:
        break;
    }
  }
  return -1;
}

// Summary statistics of one CSV column.
std::vector<double> column_stats(const stan::mcmc::chains<>& ch, int col,
                                 const Eigen::VectorXd& probs,
                                 double sampling_seconds) {
  std::vector<double> row;
  double sd = ch.sd(col);
  double n_eff = ch.effective_sample_size(col);
  row.push_back(ch.mean(col));
  row.push_back(sd / std::sqrt(n_eff));
  row.push_back(sd);
  Eigen::VectorXd q = ch.quantiles(col, probs);
  for (int j = 0; j < q.size(); ++j)
    row.push_back(q(j));
  row.push_back(n_eff);
  row.push_back(n_eff / sampling_seconds);
  row.push_back(ch.split_potential_scale_reduction(col));
  return row;
}

struct block {
  std::vector<int> cols;                  // chain column of each row
  std::vector<std::vector<double>> rows;  // statistics of each row
};

std::vector<pemc_csv::column_format> block_formats(
    const block& b, const std::vector<std::string>& header, int sig) {
  std::vector<pemc_csv::column_format> f;
  for (size_t j = 0; j < header.size(); ++j) {
    std::vector<double> vals;
    for (const auto& r : b.rows)
      vals.push_back(r[j]);
    f.push_back(pemc_csv::choose_format(vals, header[j], sig));
  }
  return f;
}

void print_rows(std::ostream& out, const stan::mcmc::chains<>& ch,
                const block& b, const std::vector<pemc_csv::column_format>& fmt,
                const std::vector<int>& widths, int name_width, int sig) {
  for (size_t r = 0; r < b.rows.size(); ++r) {
    out << std::left << std::setw(name_width) << ch.param_name(b.cols[r])
        << std::right;
    for (size_t j = 0; j < b.rows[r].size(); ++j) {
      double v = b.rows[r][j];
      out.setf(fmt[j].scientific ? std::ios_base::scientific
                                 : std::ios_base::fixed,
               std::ios_base::floatfield);
      out << std::setprecision(
          pemc_csv::display_decimals(v, sig, fmt[j].scientific))
          << std::setw(widths[j]) << v;
    }
    out << std::endl;
  }
}

// CSV rows.  Values are written with `precision` significant digits in the
// stream's general notation, except container elements in the full listing,
// which CmdStan writes in fixed notation with as many decimals as `sig`
// significant digits need.  (CmdStan leaves that fixed setting in effect for
// later scalar rows, which can drop digits of small values; here each row
// starts again from the general notation.)
void csv_rows(std::ostream& out, const stan::mcmc::chains<>& ch,
              const block& b, int sig, int precision, bool container_style) {
  for (size_t r = 0; r < b.rows.size(); ++r) {
    const std::string& name = ch.param_name(b.cols[r]);
    out.unsetf(std::ios_base::floatfield);
    out << std::setprecision(precision);
    out << "\"" << name << "\"";
    bool element = container_style && name.find('[') != std::string::npos;
    for (double v : b.rows[r]) {
      if (element)
        out << "," << std::fixed
            << std::setprecision(pemc_csv::fixed_layout(v, sig).decimals) << v;
      else
        out << "," << v;
    }
    out << std::endl;
  }
  out.unsetf(std::ios_base::floatfield);
  out << std::setprecision(precision);
}

void print_seconds(std::ostream& out, double v) {
  out << std::fixed << std::setprecision(pemc_csv::fixed_layout(v, 2).decimals)
      << v;
}

void write_timing(std::ostream& out, const pemc_csv::chain_set& cs,
                  const std::string& prefix) {
  const stan::mcmc::chains<>& ch = cs.get();
  int n = ch.num_chains();
  out << prefix << "Inference for Stan model: " << cs.metadata.model
      << std::endl;
  out << prefix << n << " chains: each with iter=(";
  for (int c = 0; c < n; ++c)
    out << (c ? "," : "") << ch.num_kept_samples(c);
  out << "); warmup=(";
  for (int c = 0; c < n; ++c)
    out << (c ? "," : "") << ch.warmup(c);
  out << "); thin=(";
  for (int c = 0; c < n; ++c)
    out << (c ? "," : "") << cs.thin[c];
  out << "); " << ch.num_samples() << " iterations saved." << std::endl
      << prefix << std::endl;

  struct phase {
    const char* label;
    const std::vector<double>* per_chain;
    double total;
  };
  phase phases[2] = {{"Warmup", &cs.warmup_seconds, cs.total_warmup_seconds()},
                     {"Sampling", &cs.sampling_seconds,
                      cs.total_sampling_seconds()}};
  for (const phase& p : phases) {
    double total = p.total;
    std::string unit = "seconds";
    if (total / 3600 > 1) {
      total /= 3600;
      unit = "hours";
    } else if (total / 60 > 1) {
      total /= 60;
      unit = "minutes";
    }
    out << prefix << p.label << " took ";
    if (n == 1) {
      print_seconds(out, total);
      out << " " << unit << std::endl;
    } else {
      out << "(";
      for (int c = 0; c < n; ++c) {
        if (c)
          out << ", ";
        print_seconds(out, (*p.per_chain)[c]);
      }
      out << ") seconds, ";
      print_seconds(out, total);
      out << " " << unit << " total" << std::endl;
    }
  }
}

void write_footer(std::ostream& out, const pemc_csv::chain_set& cs,
                  const std::string& prefix) {
  out << prefix << "Samples were drawn using " << cs.metadata.algorithm
      << " with " << cs.metadata.engine << "." << std::endl;
  out << prefix
      << "For each parameter, N_Eff is a crude measure of effective sample "
         "size,"
      << std::endl;
  out << prefix
      << "and R_hat is the potential scale reduction factor on split chains "
         "(at "
      << std::endl;
  out << prefix << "convergence, R_hat=1)." << std::endl;
}

void print_autocorrelation(const stan::mcmc::chains<>& ch, int chain_1based,
                           int name_len) {
  int c = chain_1based - 1;
  int n_params = ch.num_params();
  std::vector<Eigen::VectorXd> ac(n_params);
  for (int i = 0; i < n_params; ++i)
    ac[i] = ch.autocorrelation(c, i);
  std::cout << "Displaying the autocorrelations for chain " << chain_1based
            << ":" << std::endl
            << std::endl;
  long n_lags = n_params > 0 ? ac[0].size() : 0;
  int lag_width = 1;
  for (long x = n_lags; x != 0; x /= 10)
    ++lag_width;
  std::cout << std::setw(lag_width > 4 ? lag_width : 4) << "Lag";
  for (int i = 0; i < n_params; ++i)
    std::cout << std::setw(name_len + 1) << std::right << ch.param_name(i);
  std::cout << std::endl;
  for (long lag = 0; lag < n_lags; ++lag) {
    std::cout << std::setw(lag_width) << std::right << lag;
    for (int i = 0; i < n_params; ++i)
      std::cout << std::setw(name_len + 1) << std::right << ac[i](lag);
    std::cout << std::endl;
  }
}

}  // namespace

int main(int argc, const char* argv[]) {
  if (argc < 2) {
    std::cout << kUsage << std::endl;
    return pemc_csv::EXIT_NOT_OK;
  }
  options opt;
  int status = parse_args(argc, argv, opt);
  if (status >= 0)
    return status;
  if (opt.files.empty()) {
    std::cout << "input_files is required" << std::endl
              << "Run with --help for more information." << std::endl;
    return pemc_csv::EXIT_NOT_OK;
  }
  for (const std::string& f : opt.files) {
    if (!pemc_csv::file_readable(f)) {
      std::cout << "input_files: File does not exist: " << f << std::endl
                << "Run with --help for more information." << std::endl;
      return pemc_csv::EXIT_NOT_OK;
    }
  }
  if (opt.csv_given && pemc_csv::file_readable(opt.csv_filename)) {
    std::cout << "--csv_filename: Path already exists: " << opt.csv_filename
              << std::endl
              << "Run with --help for more information." << std::endl;
    return pemc_csv::EXIT_NOT_OK;
  }
  if (opt.autocorr_given
      && opt.autocorr > static_cast<long>(opt.files.size())) {
    std::cout << "Option --autocorr: " << opt.autocorr
              << " not a valid chain id." << std::endl;
    return pemc_csv::EXIT_NOT_OK;
  }

  // percentiles: integers in [1, 99], increasing
  std::string spec = trim(opt.percentiles);
  std::vector<std::string> pct_labels;
  {
    std::string cur;
    for (char c : spec + ",") {
      if (c == ',' || c == ' ') {
        if (!cur.empty())
          pct_labels.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
  }
  Eigen::VectorXd probs(pct_labels.size());
  {
    long prev = 0;
    bool ok = !pct_labels.empty();
    for (size_t j = 0; j < pct_labels.size() && ok; ++j) {
      long p = 0;
      if (!parse_int(pct_labels[j], p) || p < 1 || p > 99 || p < prev)
        ok = false;
      else
        probs(j) = p / 100.0;
      prev = p;
    }
    if (!ok) {
      std::cout << "Option --percentiles " << spec
                << ": values must be in range (1,99), inclusive, and strictly "
                   "increasing."
                << std::endl;
      return pemc_csv::EXIT_NOT_OK;
    }
  }
  if (opt.csv_given) {
    std::FILE* f = std::fopen(opt.csv_filename.c_str(), "w");
    if (!f) {
      std::cout << "Cannot save to csv_filename: " << opt.csv_filename << "."
                << std::endl;
      return pemc_csv::EXIT_NOT_OK;
    }
    std::fclose(f);
  }

  try {
    pemc_csv::chain_set cs = pemc_csv::read_chains(opt.files, &std::cout, true);
    const stan::mcmc::chains<>& ch = cs.get();

    // header
    std::vector<std::string> header = {"Mean", "MCSE", "StdDev"};
    for (const std::string& p : pct_labels)
      header.push_back(p + "%");
    header.push_back("N_Eff");
    header.push_back("N_Eff/s");
    header.push_back("R_hat");

    // column 0 is lp__, then the sampler's own columns (names ending "__"),
    // then the model's variables
    int name_len = 0;
    int n_underscore = 0;
    for (int i = 0; i < ch.num_params(); ++i) {
      name_len = std::max<int>(name_len, ch.param_name(i).size());
      if (pemc_csv::has_suffix(ch.param_name(i), "__"))
        ++n_underscore;
    }
    int n_sampler = std::max(n_underscore - 1, 0);
    int model_start = std::min(n_sampler + 1, ch.num_params());

    double sampling_seconds = cs.total_sampling_seconds();
    block lp, sampler, model;
    if (ch.num_params() > 0)
      lp.cols.push_back(0);
    for (int i = 1; i <= n_sampler && i < ch.num_params(); ++i)
      sampler.cols.push_back(i);
    bool subset = !opt.include.empty();
    if (subset) {
      std::set<std::string> wanted(opt.include.begin(), opt.include.end());
      for (int i = model_start; i < ch.num_params(); ++i)
        if (wanted.erase(ch.param_name(i)) > 0)
          model.cols.push_back(i);
      if (!wanted.empty()) {
        std::cout << "--include_param: Unrecognized parameter(s): ";
        for (const std::string& w : wanted)
          std::cout << "'" << w << "' ";
        std::cout << std::endl;
        return pemc_csv::EXIT_NOT_OK;
      }
    } else {
      model.cols = pemc_csv::display_order(ch, model_start, ch.num_params());
    }
    for (block* b : {&lp, &sampler, &model})
      for (int c : b->cols)
        b->rows.push_back(column_stats(ch, c, probs, sampling_seconds));

    int sig = opt.sig_figs;
    std::vector<pemc_csv::column_format> sampler_fmt
        = block_formats(sampler, header, sig);
    std::vector<pemc_csv::column_format> model_fmt
        = block_formats(model, header, sig);
    std::vector<int> widths;
    for (size_t j = 0; j < header.size(); ++j)
      widths.push_back(std::max(sampler_fmt[j].width, model_fmt[j].width));

    // console table
    std::ostream& out = std::cout;
    write_timing(out, cs, "");
    out << std::endl;
    out << std::setw(name_len + 1) << "";
    for (size_t j = 0; j < header.size(); ++j)
      out << std::setw(widths[j]) << header[j];
    out << std::endl << std::endl;
    // lp__ is laid out with the model variables' notation, as in CmdStan
    print_rows(out, ch, lp, model_fmt, widths, name_len + 1, sig);
    print_rows(out, ch, sampler, sampler_fmt, widths, name_len + 1, sig);
    out << std::endl;
    print_rows(out, ch, model, model_fmt, widths, name_len + 1, sig);
    out << std::endl;
    write_footer(out, cs, "");

    if (opt.autocorr_given) {
      print_autocorrelation(ch, static_cast<int>(opt.autocorr), name_len);
      std::cout << std::endl;
    }

    if (opt.csv_given) {
      std::ofstream csv(opt.csv_filename.c_str(),
                        std::ios_base::out | std::ios_base::app);
      int precision = opt.sig_figs_given ? opt.sig_figs : 6;
      csv << std::setprecision(precision);
      csv << "name";
      for (const std::string& h : header)
        csv << "," << h;
      csv << std::endl;
      csv_rows(csv, ch, lp, sig, precision, false);
      csv_rows(csv, ch, sampler, sig, precision, false);
      csv_rows(csv, ch, model, sig, precision, !subset);
      write_timing(csv, cs, "# ");
      write_footer(csv, cs, "# ");
      csv.close();
      if (!csv) {
        std::cout << "Cannot save to csv_filename: " << opt.csv_filename
                  << "." << std::endl;
        return pemc_csv::EXIT_NOT_OK;
      }
    }
  } catch (const std::exception& e) {
    std::cout << "Error during processing. " << e.what() << std::endl;
    return pemc_csv::EXIT_NOT_OK;
  }
  return 0;
}
