// Fixture for ThreadSafety.ViolationsAreRejected (tests/tsa/check_violations.sh). Built with
// -DVIOLATION=0 it is correct and clang must accept it; each VIOLATION=n breaks one locking rule
// and clang (-Wthread-safety -Werror=thread-safety) must reject it. Not part of any target.
#include "common/thread_annotations.h"

class Account {
 public:
  void deposit(int amount) EXCLUDES(mu_) {
    swarm::MutexLock lock(mu_);
    add_locked(amount);
    cv_.notify_all();
  }

  int balance() EXCLUDES(mu_) {
#if VIOLATION == 1
    return balance_;  // reads a GUARDED_BY field without its mutex
#else
    swarm::MutexLock lock(mu_);
    return balance_;
#endif
  }

  void withdraw(int amount) EXCLUDES(mu_) {
#if VIOLATION == 2
    add_locked(-amount);  // calls a REQUIRES(mu_) helper without the mutex
#else
    swarm::MutexLock lock(mu_);
    add_locked(-amount);
#endif
  }

  void wait_positive() EXCLUDES(mu_) {
    swarm::MutexLock lock(mu_);
#if VIOLATION == 3
    cv_.wait(mu_, [this] { return balance_ > 0; });  // a predicate that does not say REQUIRES(mu_)
#else
    cv_.wait(mu_, [this]() REQUIRES(mu_) { return balance_ > 0; });
#endif
  }

  void reset() EXCLUDES(mu_) {
    mu_.lock();
    balance_ = 0;
#if VIOLATION != 4
    mu_.unlock();  // VIOLATION 4 returns with the mutex still held
#endif
  }

  void read_after_unlock() EXCLUDES(mu_) {
    swarm::MutexLock lock(mu_);
    balance_ += 1;
    lock.unlock();
#if VIOLATION == 5
    balance_ += 1;  // writes the field after the scoped lock dropped the mutex
#endif
  }

 private:
  void add_locked(int amount) REQUIRES(mu_) { balance_ += amount; }

  swarm::Mutex mu_;
  swarm::CondVar cv_;
  int balance_ GUARDED_BY(mu_) = 0;
};

int main() {
  Account a;
  a.deposit(2);
  a.withdraw(1);
  a.wait_positive();
  a.read_after_unlock();
  a.reset();
  return a.balance();
}
