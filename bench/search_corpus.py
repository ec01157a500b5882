#!/usr/bin/env python3
"""Writes a geonames-shaped NDJSON corpus and an esrally track that indexes it
and queries it, so that esrally and loadcell (`--corpus`) send the same
documents in the same bulks (bench/search.sh).

    search_corpus.py --dir DIR --documents N --bulk-size B --clients C \
                     --index NAME --query-iterations Q

DIR/documents.json   N documents, one JSON object a line, ~310 bytes each, as
                     esrally's geonames corpus (same fields and types)
DIR/track.json       the local track: create the index (6 shards, 0 replicas,
                     the geonames mapping), bulk-index the corpus with C
                     clients, refresh, then a term and a match_phrase query
                     Q times each with C clients
DIR/index.json       the index body (also given to loadcell as --mapping)
DIR/term.toml, DIR/phrase.toml   the two queries (loadcell --query-file)
"""
import argparse
import json
import random
from pathlib import Path

SYLLABLES = ["san", "ta", "ma", "ri", "ber", "gen", "lo", "ka", "du", "vil", "le", "mon",
             "ter", "ro", "sa", "na", "bur", "ham", "stein", "dorf", "vi", "ko", "lin"]
WORDS = ["Sankt", "Lake", "Mount", "River", "Saint", "Nova", "Port", "Upper", "Lower", "Cerro"]
# A few countries hold most places, as in the real corpus.
COUNTRIES = ["US", "CN", "IN", "NO", "MX", "ID", "CA", "RU", "DE", "IR", "FR", "AT", "BR",
             "PK", "AU", "IT", "ES", "JP", "TR", "GB", "PE", "CO", "AR", "TH", "PH"]
COUNTRY_WEIGHTS = [1.0 / (i + 1) for i in range(len(COUNTRIES))]
FEATURES = [("P", "PPL"), ("H", "STM"), ("T", "HLL"), ("S", "FRM"), ("L", "AREA"), ("T", "MT")]
ZONES = ["America/New_York", "Asia/Shanghai", "Asia/Kolkata", "Europe/Oslo", "Europe/Vienna",
         "America/Mexico_City", "Europe/Berlin", "Asia/Tehran", "Europe/Paris"]

MAPPING = {
    "settings": {"index": {"number_of_shards": 6, "number_of_replicas": 0}},
    "mappings": {"dynamic": "strict", "properties": {
        "geonameid": {"type": "long"},
        "name": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "asciiname": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "alternatenames": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "feature_class": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "feature_code": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "country_code": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "cc2": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "admin1_code": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "admin2_code": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "admin3_code": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "admin4_code": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "population": {"type": "long"},
        "elevation": {"type": "integer"},
        "dem": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "timezone": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "location": {"type": "geo_point"},
    }},
}
TERM = {"query": {"term": {"country_code.raw": "AT"}}}
PHRASE = {"query": {"match_phrase": {"name": "Sankt Georgen"}}}


def name(rng: random.Random) -> str:
    words = [w.capitalize() for w in
             ("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3)))
              for _ in range(rng.randint(1, 2)))]
    if rng.random() < 0.3:
        words.insert(0, rng.choice(WORDS))
    if rng.random() < 0.01:
        return "Sankt Georgen"
    return " ".join(words)


def document(rng: random.Random, n: int) -> dict:
    place = name(rng)
    alternates = ",".join(name(rng) for _ in range(rng.randint(0, 3)))
    feature_class, feature_code = rng.choice(FEATURES)
    return {
        "geonameid": 1_000_000 + n, "name": place, "asciiname": place,
        "alternatenames": alternates, "feature_class": feature_class,
        "feature_code": feature_code,
        "country_code": rng.choices(COUNTRIES, COUNTRY_WEIGHTS)[0],
        "cc2": rng.choice(["", "", "", "AT,DE"]),
        "admin1_code": f"{rng.randint(0, 99):02d}", "admin2_code": str(rng.randint(100, 99999)),
        "population": rng.choice([0, 0, 0, rng.randint(10, 90000)]),
        "dem": str(rng.randint(-10, 3000)), "timezone": rng.choice(ZONES),
        "location": [round(rng.uniform(-180, 180), 5), round(rng.uniform(-80, 80), 5)],
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dir", type=Path, required=True)
    p.add_argument("--documents", type=int, required=True)
    p.add_argument("--bulk-size", type=int, default=5000)
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--index", default="esrally-geonames")
    p.add_argument("--query-iterations", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(a.seed)
    corpus = a.dir / "documents.json"
    size = 0
    with corpus.open("w") as f:
        for n in range(a.documents):
            line = json.dumps(document(rng, n), separators=(",", ":")) + "\n"
            size += len(line.encode())
            f.write(line)
    (a.dir / "index.json").write_text(json.dumps(MAPPING))
    # The same bodies as loadcell query files (no parameters: esrally's
    # track sends one fixed query).
    for name, body in (("term", TERM), ("phrase", PHRASE)):
        (a.dir / f"{name}.toml").write_text(f"[[query]]\nbody = '{json.dumps(body)}'\n")
    queries = [
        {"operation": {"name": q, "operation-type": "search", "index": a.index, "body": body},
         "clients": a.clients, "warmup-iterations": a.query_iterations // 10,
         "iterations": a.query_iterations}
        for q, body in (("term", TERM), ("phrase", PHRASE))
    ]
    track = {
        "version": 2,
        "description": "loadcell side-by-side: a geonames-shaped corpus, bulk and queries",
        "indices": [{"name": a.index, "body": "index.json"}],
        "corpora": [{"name": "geonames-like", "documents": [{
            "source-file": "documents.json", "document-count": a.documents,
            "uncompressed-bytes": size}]}],
        "schedule": [
            {"operation": {"operation-type": "delete-index"}},
            {"operation": {"operation-type": "create-index"}},
            {"operation": {"operation-type": "cluster-health", "request-params": {
                "wait_for_status": "green"}, "retry-until-success": True}},
            {"operation": {"name": "index-append", "operation-type": "bulk",
                           "bulk-size": a.bulk_size}, "clients": a.clients},
            {"operation": {"operation-type": "refresh"}},
            *queries,
        ],
    }
    # esrally reads track.json, OpenSearch Benchmark workload.json.
    for name in ("track.json", "workload.json"):
        (a.dir / name).write_text(json.dumps(track, indent=1))
    print(json.dumps({"documents": a.documents, "bytes": size,
                      "mean_bytes": size / max(a.documents, 1)}))


if __name__ == "__main__":
    main()
