// bin/diagnose of pemc-stan's CmdStan-compatible installation.
//
// Reads the Stan CSV files of one NUTS-HMC run (one file per chain) and runs
// the checks of CmdStan 2.35's diagnose utility, in this order:
//   * transitions that saturated the maximum tree depth  (treedepth__)
//   * divergent transitions                               (divergent__)
//   * E-BFMI of the sampler's energy                      (energy__)
//   * effective sample size per draw < 0.001              (model variables)
//   * split R-hat > 1.05                                  (model variables)
// and ends with "Processing complete, no problems detected." when no check
// failed, "Processing complete." otherwise.  Statistics come from
// stan::mcmc::chains, as in CmdStan.
#include "csv_tools.hpp"

#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

namespace {

const double kRhatLimit = 1.05;
const double kEssPerDrawLimit = 0.001;
const double kEbfmiLimit = 0.3;

void print_name_list(const std::vector<std::string>& names) {
  std::cout << "  ";
  for (size_t k = 0; k < names.size(); ++k)
    std::cout << (k ? ", " : "") << names[k];
  std::cout << std::endl;
}

// E-BFMI: mean squared change of the energy between successive draws over
// the variance of the energy (draws of all chains, one after the other).
double e_bfmi(const Eigen::VectorXd& energy) {
  long n = energy.size();
  if (n < 2)
    return std::numeric_limits<double>::quiet_NaN();
  double sq_steps = 0;
  for (long k = 1; k < n; ++k) {
    double d = energy(k) - energy(k - 1);
    sq_steps += d * d;
  }
  double mean = energy.mean();
  double ss = 0;
  for (long k = 0; k < n; ++k)
    ss += (energy(k) - mean) * (energy(k) - mean);
  double variance = ss / (n - 1);
  return (sq_steps / (n - 1)) / variance;
}

}  // namespace

int main(int argc, const char* argv[]) {
  if (argc == 1) {
    std::cout << "USAGE:  diagnose <filename 1> [<filename 2> ... <filename N>]"
              << std::endl
              << std::endl;
    return 0;
  }
  std::vector<std::string> files;
  for (int k = 1; k < argc; ++k) {
    if (pemc_csv::file_readable(argv[k]))
      files.push_back(argv[k]);
    else
      std::cout << "File " << argv[k] << " not found" << std::endl;
  }
  if (files.empty()) {
    std::cout << "No valid input files, exiting." << std::endl;
    return 0;
  }

  std::cout << "Processing csv files: ";
  for (size_t k = 0; k < files.size(); ++k)
    std::cout << (k ? ", " : "") << files[k];
  std::cout << std::endl << std::endl;

  pemc_csv::chain_set cs;
  try {
    cs = pemc_csv::read_chains(files, &std::cout, false);
  } catch (const std::exception& e) {
    std::cout << "Error during processing. " << e.what() << std::endl;
    return pemc_csv::EXIT_NOT_OK;
  }
  const stan::mcmc::chains<>& ch = cs.get();
  if (ch.num_chains() == 0) {
    std::cout << "No draws found in the input files, nothing to check."
              << std::endl;
    return 0;
  }

  long n_draws = ch.num_kept_samples();
  bool problems = false;
  std::vector<std::string> low_ess, high_rhat;

  for (int i = 0; i < ch.num_params(); ++i) {
    const std::string& name = ch.param_name(i);
    if (name == "treedepth__") {
      std::cout << "Checking sampler transitions treedepth." << std::endl;
      int limit = cs.last_max_depth;
      Eigen::VectorXd depth = ch.samples(i);
      long saturated = 0;
      for (long k = 0; k < depth.size(); ++k)
        if (depth(k) >= limit)
          ++saturated;
      if (saturated > 0) {
        problems = true;
        std::cout << saturated << " of " << n_draws << " ("
                  << std::setprecision(2)
                  << 100.0 * static_cast<double>(saturated) / n_draws
                  << "%) transitions hit the maximum treedepth limit of "
                  << limit << ", or 2^" << limit << " leapfrog steps."
                  << std::endl
                  << "Such trajectories are cut short, so the sampler "
                     "explores the posterior slowly."
                  << std::endl
                  << "Raising the max_depth limit is likely to help "
                     "performance."
                  << std::endl
                  << std::endl;
      } else {
        std::cout << "Treedepth satisfactory for all transitions."
                  << std::endl
                  << std::endl;
      }
    } else if (name == "divergent__") {
      std::cout << "Checking sampler transitions for divergences."
                << std::endl;
      long divergent = static_cast<long>(ch.samples(i).sum());
      if (divergent > 0) {
        problems = true;
        std::cout << divergent << " of " << n_draws << " ("
                  << std::setprecision(2)
                  << 100.0 * static_cast<double>(divergent) / n_draws
                  << "%) transitions ended with a divergence." << std::endl
                  << "Divergent transitions mean that HMC could not explore "
                     "all of the posterior distribution."
                  << std::endl
                  << "Try a larger adapt delta, closer to 1." << std::endl
                  << "If divergences remain, consider reparameterizing the "
                     "model."
                  << std::endl
                  << std::endl;
      } else {
        std::cout << "No divergent transitions found." << std::endl
                  << std::endl;
      }
    } else if (name == "energy__") {
      std::cout << "Checking E-BFMI - sampler transitions HMC potential "
                   "energy."
                << std::endl;
      double bfmi = e_bfmi(ch.samples(i));
      if (bfmi < kEbfmiLimit) {
        problems = true;
        std::cout << "The E-BFMI, " << bfmi
                  << ", is below the nominal threshold of " << kEbfmiLimit
                  << " which suggests that HMC may have trouble exploring "
                     "the target distribution."
                  << std::endl
                  << "A reparameterization of the model may help."
                  << std::endl
                  << std::endl;
      } else {
        std::cout << "E-BFMI satisfactory." << std::endl << std::endl;
      }
    } else if (name.find("__") == std::string::npos) {
      if (ch.effective_sample_size(i) / n_draws < kEssPerDrawLimit)
        low_ess.push_back(name);
      if (ch.split_potential_scale_reduction(i) > kRhatLimit)
        high_rhat.push_back(name);
    }
  }

  if (!low_ess.empty()) {
    problems = true;
    std::cout << "The following parameters had fewer than "
              << std::setprecision(6) << kEssPerDrawLimit
              << " effective draws per transition:" << std::endl;
    print_name_list(low_ess);
    std::cout << "With so few effective draws the effective sample size "
                 "estimates may be too optimistic,"
              << std::endl
              << "and the true efficiency may be much lower than reported."
              << std::endl
              << std::endl;
  } else {
    std::cout << "Effective sample size satisfactory." << std::endl
              << std::endl;
  }

  if (!high_rhat.empty()) {
    problems = true;
    // (CmdStan prints this limit with whatever precision an earlier message
    // left on the stream, e.g. "1.1"; the actual limit is always 1.05.)
    std::cout << "The following parameters had split R-hat greater than "
              << std::setprecision(6) << kRhatLimit << ":" << std::endl;
    print_name_list(high_rhat);
    std::cout << "Values this high mean the chains have not mixed and the "
                 "estimates are biased."
              << std::endl
              << "More informative priors or a better parameterization of "
                 "the model may help."
              << std::endl
              << std::endl;
  } else {
    std::cout << "Split R-hat values satisfactory all parameters."
              << std::endl
              << std::endl;
  }

  if (problems)
    std::cout << "Processing complete." << std::endl;
  else
    std::cout << "Processing complete, no problems detected." << std::endl;
  return 0;
}
