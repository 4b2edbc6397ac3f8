//! The mechanisms behind `policy`: deadline, breaker, bulkhead, shedding and retry.
