// tests/report/run.mjs: the ctest entry of the HTML report's browser tests (tests/CMakeLists.txt).
// Checks that Chromium and playwright-core (npm ci here) are installed, then runs the tests with
// node's test runner. Without them it prints why and exits 77, which ctest counts as skipped,
// unless MEMLENS_REQUIRE_REPORT_TESTS=1 (CI sets it), which makes a missing piece a failure.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const chromium = process.env.MEMLENS_CHROMIUM || '/usr/bin/chromium';
const required = process.env.MEMLENS_REQUIRE_REPORT_TESTS === '1';

function skip(why) {
  console.log(`report tests SKIPPED: ${why}`);
  process.exit(required ? 1 : 77);
}

if (!existsSync(chromium)) skip(`no Chromium at ${chromium} (Debian: apt-get install chromium)`);
if (!existsSync(path.join(here, 'node_modules', 'playwright-core', 'package.json'))) {
  skip(`playwright-core is not installed (run: npm ci --prefix ${here})`);
}
const result = spawnSync(process.execPath,
  ['--test', path.join(here, 'report.test.mjs'), path.join(here, 'live.test.mjs')],
  { stdio: 'inherit' });
process.exit(result.status === null ? 1 : result.status);
