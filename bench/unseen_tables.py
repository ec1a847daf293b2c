#!/usr/bin/env python3
"""Real tables the project was never tuned on, as plain CSVs with headers.

    bench/unseen_tables.py OUTDIR [--sklearn DIR] [--plotly DIR] [--sdmetrics DIR]

Benchmark use only (docs/quality.md, "Unseen tables"): never read by tests or
by the product. The tables come from files that Python packages installed on
the benchmark machine ship; none is copied into the repository. A table whose
package file is missing is skipped with a message on stderr. Standard library
only, so any python3 runs it.

Provenance and licence, per table (the packages' own data files):

scikit-learn 1.5 (BSD-3-Clause package), sklearn/datasets/data/. sklearn's
CSVs start with a line of counts and class names (load_csv_data in
sklearn/datasets/_base.py); the names below are the loaders' feature_names and
the class column holds the class name (target_names), as load_*(as_frame=True)
with the names mapped.
- breast_cancer (569 x 31): UCI Breast Cancer Wisconsin (Diagnostic),
  Wolberg, Street, Mangasarian 1995; UCI ML Repository, CC BY 4.0.
- wine (178 x 14): UCI Wine recognition (Forina et al.), CC BY 4.0.
- boston (506 x 14): Harrison & Rubinfeld 1978, via StatLib; sklearn removed
  its loader in 1.2 for an ethical problem in column B; kept here only as a
  numeric benchmark shape. Public domain (StatLib), no licence stated.
- diabetes (442 x 11): Efron et al. 2004 "Least Angle Regression", raw
  (unscaled) data and target; no licence stated beyond sklearn's BSD-3.
- digits (1797 x 65): test set of UCI Optical Recognition of Handwritten
  Digits (Alpaydin, Kaynak 1998), 8x8 counts 0-16, CC BY 4.0.
plotly 7.1 (MIT), plotly/package_data/datasets/ (plotly.data's docstrings):
- tips (244 x 7): restaurant bills, Bryant & Smith 1995 (also in R reshape2).
- stocks (105 x 7): weekly closing prices of 6 stocks 2018-2019 (dates).
- carshare (249 x 4): car-sharing availability per zone, Montreal.
- experiment (100 x 5): simulated participants (plotly's own).
- election (58 x 8): 2013 Montreal mayoral election per district.
- wind (128 x 3): wind intensity per direction (plotly's own).
- iris (150 x 6): Fisher 1936 iris with species name and id.
- plotly_gapminder (1704 x 7): Gapminder life expectancy / population / GDP, CC BY 4.0
  (Gapminder Foundation); iso_num and the centroids dropped (the country's
  constant attributes), kept: country, continent, year, lifeExp, pop,
  gdpPercap, iso_alpha.
sdmetrics 0.32 (MIT), sdmetrics/demos/single_table/:
- student_placements (215 x 17): SDV's demo table (mixed types, booleans,
  dates, missing values), MIT with the package.
"""
import argparse
import csv
import gzip
import io
import os
import sys

SITE = '/work/venvs/{}/lib/python3.11/site-packages'
SKLEARN = os.path.join(SITE.format('dpmm'), 'sklearn/datasets/data')
PLOTLY = os.path.join(SITE.format('golden'), 'plotly/package_data/datasets')
SDMETRICS = os.path.join(SITE.format('golden'), 'sdmetrics/demos/single_table')

BREAST = [f'{p}{n}' for p in ('mean ', '', 'worst ') for n in (
    'radius', 'texture', 'perimeter', 'area', 'smoothness', 'compactness',
    'concavity', 'concave points', 'symmetry', 'fractal dimension')]
BREAST = BREAST[:10] + [n + ' error' for n in BREAST[10:20]] + BREAST[20:]
WINE = ['alcohol', 'malic_acid', 'ash', 'alcalinity_of_ash', 'magnesium',
        'total_phenols', 'flavanoids', 'nonflavanoid_phenols', 'proanthocyanins',
        'color_intensity', 'hue', 'od280/od315_of_diluted_wines', 'proline']
DIABETES = ['age', 'sex', 'bmi', 'bp', 's1', 's2', 's3', 's4', 's5', 's6']
DIGITS = [f'pixel_{r}_{c}' for r in range(8) for c in range(8)]


def read_text(path):
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt', newline='', encoding='utf-8') as f:
        return f.read()


def sklearn_classes(path, names, class_col='target'):
    """sklearn's format: 'n_rows,n_features,class names...' then the rows,
    the last field the class index (load_csv_data)."""
    rows = list(csv.reader(io.StringIO(read_text(path))))
    head, body = rows[0], rows[1:]
    n, nf, classes = int(head[0]), int(head[1]), head[2:]
    assert nf == len(names) and len(body) == n, (path, nf, len(names), len(body), n)
    return [names + [class_col]] + [r[:-1] + [classes[int(r[-1])]] for r in body]


def boston(path):
    rows = list(csv.reader(io.StringIO(read_text(path))))
    return rows[1:]  # line 1 is counts, line 2 the header


def diabetes(data, target):
    x = [line.split() for line in read_text(data).splitlines() if line.strip()]
    y = [line.strip() for line in read_text(target).splitlines() if line.strip()]
    assert len(x) == len(y)
    return [DIABETES + ['target']] + [r + [str(int(float(v)))] for r, v in zip(x, y)]


def digits(path):
    body = list(csv.reader(io.StringIO(read_text(path))))
    return [DIGITS + ['target']] + body


def plain(path, drop=()):
    rows = list(csv.reader(io.StringIO(read_text(path))))
    keep = [i for i, h in enumerate(rows[0]) if h not in drop]
    return [[r[i] for i in keep] for r in rows]


def tables(a):
    sk, pl, sd = a.sklearn, a.plotly, a.sdmetrics
    yield 'breast_cancer', [f'{sk}/breast_cancer.csv'], \
        lambda p: sklearn_classes(p[0], BREAST, 'diagnosis')
    yield 'wine', [f'{sk}/wine_data.csv'], lambda p: sklearn_classes(p[0], WINE, 'class')
    yield 'boston', [f'{sk}/boston_house_prices.csv'], lambda p: boston(p[0])
    yield 'diabetes', [f'{sk}/diabetes_data_raw.csv.gz', f'{sk}/diabetes_target.csv.gz'], \
        lambda p: diabetes(*p)
    yield 'digits', [f'{sk}/digits.csv.gz'], lambda p: digits(p[0])
    for t in ('tips', 'stocks', 'carshare', 'experiment', 'election', 'wind', 'iris'):
        yield t, [f'{pl}/{t}.csv.gz'], lambda p: plain(p[0])
    yield 'plotly_gapminder', [f'{pl}/gapminder.csv.gz'], \
        lambda p: plain(p[0], drop=('iso_num', 'centroid_lon', 'centroid_lat'))
    yield 'student_placements', [f'{sd}/student_placements_real.csv'], lambda p: plain(p[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('outdir')
    ap.add_argument('--sklearn', default=SKLEARN)
    ap.add_argument('--plotly', default=PLOTLY)
    ap.add_argument('--sdmetrics', default=SDMETRICS)
    ap.add_argument('--only', default='', help='comma-separated table names')
    a = ap.parse_args()
    only = set(filter(None, a.only.split(',')))
    os.makedirs(a.outdir, exist_ok=True)
    written = 0
    for name, paths, convert in tables(a):
        if only and name not in only:
            continue
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            print(f'unseen_tables: {name}: skipped, no {missing[0]}', file=sys.stderr)
            continue
        rows = convert(paths)
        width = len(rows[0])
        assert all(len(r) == width for r in rows), name
        out = os.path.join(a.outdir, name + '.csv')
        with open(out, 'w', newline='', encoding='utf-8') as f:
            csv.writer(f, lineterminator='\n').writerows(rows)
        print(f'{out}: {len(rows) - 1} rows x {width}', file=sys.stderr)
        written += 1
    return 0 if written else 1


if __name__ == '__main__':
    sys.exit(main())
