// Drives gen serve's HTML view in headless Chromium with puppeteer-core, as a user does: opens
// a page, then runs each step (types into a field, clicks a button or a link, waits for the
// page it leads to), and prints, as one JSON array on stdout, what the page showed before the
// first step and after each: the url, the heading, the count, the entries of the JSON shown,
// the active filters, the forms' fields, the filters' values and whether the boxes fit their text. tests/suite/browser.rs checks them.
//
// node click-view.mjs <puppeteer-core dir> <chromium> <url> <steps as JSON>
// A step: {"click": selector} (a link or a submit button: waits for the navigation), or
// {"fill": selector, "text": "..."} (replaces the field's text). Selectors may use puppeteer's
// `::-p-text(...)`. A step whose element is missing ends the run with {"error"} as what it showed.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import fs from 'node:fs';
import os from 'node:os';

const [dir, chromium, url, stepsJson] = process.argv.slice(2);
const { default: puppeteer } = await import(
    pathToFileURL(path.join(dir, 'node_modules/puppeteer-core/lib/esm/puppeteer/puppeteer-core.js')).href);
setTimeout(() => { console.error('click-view: no end within 120 s'); process.exit(3); }, 120000).unref();

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'click-view-'));
const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: profile,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync'],
});

/** What the page shows. */
function snapshot() {
    const text = (selector) => document.querySelector(selector)?.textContent ?? null;
    const fields = (selector) => [...document.querySelectorAll(`${selector} input`)].map((i) => [i.type, i.name, i.value]);
    let entries = null;
    try {
        entries = JSON.parse(text('pre.json')).results.map((r) => r.name ?? r.url);
    } catch (e) { /* not a list */ }
    // Whether the boxes hold their text: the search box its value (measured in its own font),
    // the error box its detail (nothing past its right edge); `null` where the page has none.
    function fits() {
        const search = document.querySelector('form.search input[name=q]');
        let searchFits = null;
        if (search) {
            const style = getComputedStyle(search);
            const context = document.createElement('canvas').getContext('2d');
            context.font = style.font;
            const room = search.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
            searchFits = context.measureText(search.value).width <= room;
        }
        const error = document.querySelector('.error');
        const errorFits = error ? error.scrollWidth <= error.clientWidth : null;
        return { search: searchFits, error: errorFits };
    }
    const values = {};
    for (const p of document.querySelectorAll('p.filters')) {
        const shown = [...p.querySelectorAll(':scope > a, :scope > .chip')].map((v) => ({
            value: v.matches('a') ? v.textContent : v.querySelector('.active')?.textContent ?? null,
            active: !v.matches('a'),
            count: (v.matches('a') ? v.nextElementSibling : v.querySelector('.n'))?.textContent ?? null,
        }));
        values[p.dataset.field ?? p.querySelector('strong')?.textContent] = { note: p.querySelector('.note')?.textContent ?? null, shown };
    }
    return {
        url: location.pathname + location.search,
        h1: text('h1'),
        status: text('.status'),
        count: text('.count'),
        entries,
        active: [...document.querySelectorAll('#active .chip')].map((c) => c.firstChild.textContent.trim()),
        clear: document.getElementById('clear')?.getAttribute('href') ?? null,
        search_form: fields('form.search'),
        page_form: fields('form.page'),
        values,
        fits: fits(),
    };
}


const seen = [];
try {
    const page = await browser.newPage();
    await page.goto(url, { waitUntil: 'load' });
    seen.push(await page.evaluate(snapshot));
    for (const step of JSON.parse(stepsJson)) {
        if (step.fill) {
            await page.$eval(step.fill, (field) => { field.value = ''; });
            await page.type(step.fill, step.text);
            continue;
        }
        const target = await page.$(step.click);
        if (!target) {
            seen.push({ error: `no ${step.click} on ${page.url()}` });
            break;
        }
        await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), target.click()]);
        seen.push(await page.evaluate(snapshot));
    }
} finally {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(seen));
