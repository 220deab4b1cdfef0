#include "operator/kube/time_format.h"

#include <cstdio>
#include <ctime>

namespace swarm::kube {

std::string format_time(SystemTime t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string format_micro_time(SystemTime t) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t tt = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[48];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[64];
  std::snprintf(out, sizeof(out), "%s.%06lldZ", buf, static_cast<long long>(us % 1000000));
  return out;
}

bool parse_time(const std::string& s, SystemTime& out) {
  std::tm tm{};
  int frac_len = 0;
  long long frac = 0;
  const char* p = s.c_str();
  if (std::sscanf(p, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec) != 6) {
    return false;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  std::size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && isdigit(static_cast<unsigned char>(s[i]))) {
      if (frac_len < 9) {
        frac = frac * 10 + (s[i] - '0');
        ++frac_len;
      }
      ++i;
    }
  }
  long offset = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    int h = 0, m = 0;
    if (std::sscanf(s.c_str() + i + 1, "%2d:%2d", &h, &m) != 2) return false;
    offset = (h * 3600 + m * 60) * (s[i] == '+' ? 1 : -1);
  }
  std::time_t secs = timegm(&tm) - offset;
  while (frac_len < 9) {
    frac *= 10;
    ++frac_len;
  }
  out = std::chrono::system_clock::from_time_t(secs) +
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(frac));
  return true;
}

double to_seconds(SystemTime t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

double to_seconds(const std::string& s) {
  SystemTime t;
  return parse_time(s, t) ? to_seconds(t) : 0;
}

SystemTime from_seconds(double s) {
  return SystemTime(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::duration<double>(s)));
}

}  // namespace swarm::kube
