// Clang thread-safety analysis for the control plane: attribute macros and the annotated lock
// types every control-plane class with a mutex uses.
//
// Under clang with -Wthread-safety the macros become clang's capability attributes and the
// compiler checks, at compile time, that a field marked GUARDED_BY(mu_) is read and written only
// with mu_ held, that a REQUIRES(mu_) helper is called only with mu_ held, and that an
// EXCLUDES(mu_) entry point is not called with it held. Under gcc they expand to nothing.
// tests/tsa/ builds the control plane this way in CI (ctest -R ThreadSafety).
//
//   class Counter {
//    public:
//     void add(int n) EXCLUDES(mu_) { swarm::MutexLock lock(mu_); total_ += n; cv_.notify_all(); }
//     void wait_for_positive() EXCLUDES(mu_) {
//       swarm::MutexLock lock(mu_);
//       cv_.wait(mu_, [this]() REQUIRES(mu_) { return total_ > 0; });
//     }
//    private:
//     swarm::Mutex mu_;
//     swarm::CondVar cv_;
//     int total_ GUARDED_BY(mu_) = 0;
//   };
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#if defined(__clang__)
#define SWARM_THREAD_ATTRIBUTE(x) __attribute__((x))
#else
#define SWARM_THREAD_ATTRIBUTE(x)
#endif

// A type whose objects are capabilities (a mutex).
#define CAPABILITY(x) SWARM_THREAD_ATTRIBUTE(capability(x))
// An RAII type that acquires a capability in its constructor and releases it in its destructor.
#define SCOPED_CAPABILITY SWARM_THREAD_ATTRIBUTE(scoped_lockable)
// A field that may be read or written only with the capability held.
#define GUARDED_BY(x) SWARM_THREAD_ATTRIBUTE(guarded_by(x))
// A pointer field whose pointee may be read or written only with the capability held.
#define PT_GUARDED_BY(x) SWARM_THREAD_ATTRIBUTE(pt_guarded_by(x))
// A function the caller must call with the capabilities held (and which leaves them held).
#define REQUIRES(...) SWARM_THREAD_ATTRIBUTE(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) SWARM_THREAD_ATTRIBUTE(requires_shared_capability(__VA_ARGS__))
// A function the caller must call without the capabilities held (it takes them itself).
#define EXCLUDES(...) SWARM_THREAD_ATTRIBUTE(locks_excluded(__VA_ARGS__))
// A function that acquires / releases the capabilities (no argument: `this`).
#define ACQUIRE(...) SWARM_THREAD_ATTRIBUTE(acquire_capability(__VA_ARGS__))
#define RELEASE(...) SWARM_THREAD_ATTRIBUTE(release_capability(__VA_ARGS__))
// A function that acquires the capability when it returns the given value.
#define TRY_ACQUIRE(...) SWARM_THREAD_ATTRIBUTE(try_acquire_capability(__VA_ARGS__))
// A function that checks at run time that the capability is held; the analysis then assumes it.
#define ASSERT_CAPABILITY(x) SWARM_THREAD_ATTRIBUTE(assert_capability(x))
// A function that returns (a reference to) the given capability.
#define RETURN_CAPABILITY(x) SWARM_THREAD_ATTRIBUTE(lock_returned(x))
// Turns the analysis off inside one function body (its annotations still bind its callers).
#define NO_THREAD_SAFETY_ANALYSIS SWARM_THREAD_ATTRIBUTE(no_thread_safety_analysis)

namespace swarm {

// std::mutex as a capability. Lock it with MutexLock; wait on it with CondVar.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // Tells the analysis the caller holds this mutex (for code it cannot follow). No run-time check.
  void assert_held() const ASSERT_CAPABILITY(this) {}

  // The wrapped std::mutex, for code that needs the standard type (a std::condition_variable).
  // Locking it directly bypasses the analysis; prefer MutexLock and CondVar.
  std::mutex& native() RETURN_CAPABILITY(this) { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope, like std::lock_guard; unlock()/lock() let a scope drop the mutex
// around slow work (I/O) and take it back, like std::unique_lock.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (locked_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() RELEASE() {
    mu_.unlock();
    locked_ = false;
  }
  void lock() ACQUIRE() {
    mu_.lock();
    locked_ = true;
  }

 private:
  Mutex& mu_;
  bool locked_ = true;
};

// A condition variable used with a Mutex the caller holds (REQUIRES(mu)). Each wait releases mu
// while blocked and holds it again when it returns. The predicate runs with mu held: a lambda
// that reads guarded fields says so with REQUIRES, e.g. [this]() REQUIRES(mu_) { return done_; }.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

  // The analysis cannot follow a lock handed to std::condition_variable and back, hence
  // NO_THREAD_SAFETY_ANALYSIS on the bodies; REQUIRES(mu) still binds every caller.
  void wait(Mutex& mu) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu.native(), std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }

  template <class Predicate>
  void wait(Mutex& mu, Predicate pred) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    while (!pred()) wait(mu);
  }

  template <class Clock, class Duration>
  std::cv_status wait_until(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu.native(), std::adopt_lock);
    std::cv_status status = cv_.wait_until(lock, deadline);
    lock.release();
    return status;
  }

  // Returns pred() as of the return: false when the deadline passed with the predicate false.
  template <class Clock, class Duration, class Predicate>
  bool wait_until(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline,
                  Predicate pred) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    while (!pred()) {
      if (wait_until(mu, deadline) == std::cv_status::timeout) return pred();
    }
    return true;
  }

  template <class Rep, class Period>
  std::cv_status wait_for(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout)
      REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<std::mutex> lock(mu.native(), std::adopt_lock);
    std::cv_status status = cv_.wait_for(lock, timeout);
    lock.release();
    return status;
  }

  template <class Rep, class Period, class Predicate>
  bool wait_for(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout, Predicate pred)
      REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    return wait_until(mu, std::chrono::steady_clock::now() + timeout, std::move(pred));
  }

 private:
  std::condition_variable cv_;
};

}  // namespace swarm
