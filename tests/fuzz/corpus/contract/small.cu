/*@contract {"entry": "k", "params": ["rows", "y"], "block": [256], "grid": ["cdiv(rows, 256)"], "smem": "4 * 256", "defines": {"R": "rows * 2"}} @*/
/*@manifest {"strategy": "s", "params": {"VEC": {"default": 2, "values": [1, 2, 4]}}, "constraints": ["VEC * 8 <= 32"]} @*/
#include "ditto.cuh"
