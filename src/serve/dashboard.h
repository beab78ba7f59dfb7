// The page `bulkhead serve` answers GET / with: a self-contained dashboard (no external
// scripts, styles or fonts) that polls /status.json every two seconds and shows each
// model's versions, devices, isolation, instances, readiness, request rate, failures,
// queue, worker restarts and last check verdict.
#pragma once

namespace bulkhead::serve {

extern const char* const kDashboardHtml;

}  // namespace bulkhead::serve
