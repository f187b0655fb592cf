// Package clusterslot computes Redis Cluster hash slots, as CLUSTER
// KEYSLOT does, for the packages that must keep keys together in one slot.
package clusterslot

// Count is the number of slots of a Redis Cluster.
const Count = 16384

// Of is the slot of key: CRC16 of its hash tag — the text between the
// first '{' and the next '}', if that is not empty — or of the whole key,
// modulo Count.
func Of(key string) uint16 {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return CRC16(key) % Count
			}
		}
		break
	}
	return CRC16(key) % Count
}

// CRC16 is CRC-16/XMODEM, the checksum Redis Cluster hashes keys with.
func CRC16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
