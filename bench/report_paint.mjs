// bench/report_paint.mjs: opens an HTML report in headless Chromium (playwright-core from
// tests/report/node_modules) and prints, as JSON, milliseconds since navigation start to the
// first contentful paint, to the script having drawn every view, and to the first frame
// painted after that. usage: node bench/report_paint.mjs REPORT.html
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(new URL('../tests/report/package.json', import.meta.url));
const { chromium } = require('playwright-core');
const profile = mkdtempSync(path.join(tmpdir(), 'memlens-paint-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.MEMLENS_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 900 },
});
try {
  const page = await context.newPage();
  await page.goto(pathToFileURL(process.argv[2]).href, { waitUntil: 'commit' });
  await page.waitForSelector('body[data-ready="true"]', { timeout: 60000 });
  const result = await page.evaluate(() => new Promise((resolve) => {
    const ready = Number(document.body.dataset.readyMs);
    requestAnimationFrame(() => setTimeout(() => {
      const fcp = performance.getEntriesByName('first-contentful-paint')[0];
      resolve({ first_contentful_paint_ms: fcp ? fcp.startTime : null, ready_ms: ready,
        painted_ms: performance.now() });
    }));
  }));
  console.log(JSON.stringify(result));
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
